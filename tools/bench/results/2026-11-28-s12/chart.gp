# chart.gp -- written by run.py; plots chart.dat into chart.png
set terminal pngcairo size 1400,900 noenhanced font ",10"
set output 'tools/bench/results/2026-11-28-s12/chart.png'
set datafile missing 'NaN'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set logscale y 2
set key outside right top
set xtics rotate by -35 scale 0
set multiplot layout 2,1
set title 'Median time relative to glibc (lower is better; log scale)'
plot for [i=2:5] 'tools/bench/results/2026-11-28-s12/chart.dat' using i:xtic(1) title columnheader(i), 1 with lines lc rgb 'black' dt 2 notitle
set title 'Median peak RSS relative to glibc (lower is better; log scale)'
plot for [i=6:9] 'tools/bench/results/2026-11-28-s12/chart.dat' using i:xtic(1) title columnheader(i), 1 with lines lc rgb 'black' dt 2 notitle
unset multiplot
