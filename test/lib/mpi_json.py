"""mpi_json.py -- what the MPI test programs print: one JSON object per rank
per line, among mpirun's other output (test/multiproc/mpi_test.py,
test/consumers/openmpi_test.py)."""
import json


def by_rank(text):
    """The JSON lines of text, by their "rank" (the last one of a rank wins)."""
    ranks = {}
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            ranks[d.get("rank")] = d
    return ranks
