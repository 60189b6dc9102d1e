#!/usr/bin/env python3
# cgasm.py OUT SO FUNC...: per-instruction counts of the functions FUNC of the shared object SO
# (objdump -d) from a callgrind output OUT made with --dump-instr=yes: the first NEV event
# columns (default 1, Ir).
import sys, re, subprocess, collections
out, so, funcs = sys.argv[1], sys.argv[2], sys.argv[3:]
cnt = collections.defaultdict(lambda: [0]*12); last = 0; skip = False
for line in open(out):
    line = line.rstrip('\n')
    if line.startswith('calls='):
        skip = True; continue
    m = re.match(r'^(0x[0-9a-f]+|\+\d+|-\d+|\*)\s+(\S+)((?:\s+\d+)+)$', line)
    if not m: continue
    a = m.group(1)
    addr = int(a, 16) if a.startswith('0x') else last if a == '*' else last + int(a)
    last = addr
    if skip: skip = False; continue
    for k, v in enumerate(m.group(3).split()): cnt[addr][k] += int(v)
dis = subprocess.run(['objdump', '-d', '--no-show-raw-insn', so], capture_output=True, text=True).stdout
for f in funcs:
    blk = re.search(r'^[0-9a-f]+ <%s>:\n(.*?)\n\n' % re.escape(f), dis, re.S | re.M)
    tot = 0
    for l in blk.group(1).splitlines():
        a = int(l.split(':')[0], 16); c = cnt.get(a, [0]*12); tot += c[0]
        print(' '.join('%9d' % x for x in c[:int(__import__('os').environ.get('NEV','1'))]), l)
    print('total', f, tot)
