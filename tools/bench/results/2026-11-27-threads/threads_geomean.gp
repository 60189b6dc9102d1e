set terminal pngcairo size 1000,650 noenhanced font ',10'
set output 'tools/bench/results/2026-11-27-threads/threads_geomean.png'
set datafile missing 'NaN'
set logscale xy 2
set grid
set key outside right top autotitle columnheader
set title 'geometric mean over larson,tree,churn,prodcons,smallobj,falseshare_active: time relative to the best peer, on 2 cores'
set xlabel 'threads'
set ylabel 'time relative to the best peer (geometric mean)'
plot for [i=2:6] 'tools/bench/results/2026-11-27-threads/threads_geomean.dat' using 1:i with linespoints lw 2
