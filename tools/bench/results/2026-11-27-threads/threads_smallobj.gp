set terminal pngcairo size 1000,650 noenhanced font ',10'
set output 'tools/bench/results/2026-11-27-threads/threads_smallobj.png'
set datafile missing 'NaN'
set logscale xy 2
set grid
set key outside right top autotitle columnheader
set title 'smallobj at scale 0.25: time vs threads on 2 cores'
set xlabel 'threads'
set ylabel 'median seconds'
plot for [i=2:6] 'tools/bench/results/2026-11-27-threads/threads_smallobj.dat' using 1:i with linespoints lw 2
