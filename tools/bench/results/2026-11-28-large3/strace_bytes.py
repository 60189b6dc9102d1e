import re,sys
for f in sys.argv[1:]:
    tot={}
    for line in open(f):
        m=re.search(r'(munmap|madvise|mremap|mmap|mprotect|mincore)\((0x[0-9a-f]+|NULL), (\d+)(?:, (\d+))?',line)
        if not m: continue
        k=m.group(1)
        if 'EFAULT' in line or 'ENOMEM' in line: k+='-fail'
        if k=='mremap' and 'MAYMOVE' not in line: k='mremap-inplace'
        if 'DENYWRITE' in line or '2147483648' in line: continue
        b=int(m.group(3))
        c,s=tot.get(k,(0,0)); tot[k]=(c+1,s+b)
    print(f, '  '.join('%s %d/%.0fMB'%(k,c,s/1e6) for k,(c,s) in sorted(tot.items())))
