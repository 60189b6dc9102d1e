#!/bin/sh
# cg.sh PROG OUT : callgrind with the row's environment
env -i PATH=/usr/bin:/bin OMPI_MCA_mpi_leave_pinned=1 STARTUP_BLOCKS=64 PINHEAP_MODE=on valgrind --tool=callgrind --callgrind-out-file=$2 $1 2>&1 | grep Collected
