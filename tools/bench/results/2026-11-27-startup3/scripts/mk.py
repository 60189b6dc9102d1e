import sys, os, shutil
sys.path.insert(0, "/work/wt-startup3/tools/bench")
import startup
tag = sys.argv[1]; archive = sys.argv[2]
d = "/tmp/s3fx/" + tag
shutil.rmtree(d, ignore_errors=True); os.mkdir(d)
print(startup.build_fixtures(d, [("B", archive)], "pinheap_"))
