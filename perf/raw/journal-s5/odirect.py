import os, mmap, time, sys
N=int(sys.argv[1]) if len(sys.argv)>1 else 2000
d="/work/main/perf/out"
SIZE=8<<20
def run(mode):
    p=os.path.join(d,f"od-{mode}.bin")
    fd=os.open(p,os.O_RDWR|os.O_CREAT,0o644)
    os.pwrite(fd,b"\0"*SIZE,0); os.fdatasync(fd); os.close(fd)
    flags=os.O_RDWR
    if mode in("direct","direct_dsync"): flags|=os.O_DIRECT
    if mode in("dsync","direct_dsync"): flags|=os.O_DSYNC
    fd=os.open(p,flags)
    buf=mmap.mmap(-1,4096); buf.write(b"x"*4096)
    lat=[]
    off=0
    for i in range(N):
        t=time.perf_counter()
        if mode.startswith("direct"):
            os.pwritev(fd,[buf],(off//4096)*4096)
        else:
            os.pwrite(fd,b"x"*256,off)
        if not mode.endswith("dsync"):
            os.fdatasync(fd)
        lat.append(time.perf_counter()-t)
        off+=256
    os.close(fd); os.unlink(p)
    lat.sort()
    print(f"{mode:14s} p50 {lat[len(lat)//2]*1e6:6.0f} p99 {lat[int(len(lat)*.99)]*1e6:6.0f} p999 {lat[int(len(lat)*.999)]*1e6:6.0f} us")
for r in range(2):
    for m in ("buffered","direct","direct_dsync","dsync"):
        run(m)
