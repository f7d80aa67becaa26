"""Fake engine: like vLLM it accepts --api-key (not enforced); with --spawn-child it starts a worker
in its own process group (as vLLM's engine core) that outlives it unless the group is reaped;
--die-once FLAG:N is --die-after N for the first launch only (FLAG: a file marking that it happened)."""

import os
import runpy
import subprocess
import sys

SCRIPTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripted_server.py")
args, out, spawn = sys.argv[1:], [], False
i = 0
while i < len(args):
    if args[i] == "--api-key":
        i += 2
        continue
    if args[i] == "--die-once":
        flag, n = args[i + 1].rsplit(":", 1)
        if not os.path.exists(flag):
            open(flag, "w").close()
            out += ["--die-after", n]
        i += 2
        continue
    if args[i] == "--spawn-child":
        spawn = True
    else:
        out.append(args[i])
    i += 1
if spawn:
    child = subprocess.Popen(["sleep", "600"])
    print(f"fake engine: worker pid {child.pid}", flush=True)
print("fake engine: serving", flush=True)
sys.argv = [SCRIPTED, *out]
runpy.run_path(SCRIPTED, run_name="__main__")
