"""Does where the buffers sit explain the grading-to-grading spread of small RMSNorm medians?

Run on a GPU, once per process: ``python benchmarks/buffer_placement.py TOKENS [zero|read]`` (run it
twice to compare processes). The second argument is how the cache is flushed before each call:
``zero`` writes the flush buffer (what the grader does), ``read`` sums it (tried on 2026-11-30, see
docs/measurements.md). One process: 64 separately allocated input buffers (outputs kept per buffer, as
the grader's worker does), cache flush + device spin + events per call, 24 samples per buffer in
shuffled order. Prints the overall median, the spread of per-buffer medians, and the median over
the first 8 buffers. Record what it prints, with machine and date, in docs/measurements.md.
"""
import importlib.util, json, random, statistics, sys
import torch
sys.path.insert(0, ".")
from apex_core.kernels.rms_norm import make_inputs_torch

spec = importlib.util.spec_from_file_location("b", "apex_core/kernels/rms_norm/baseline_triton.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = mod.rms_norm
tokens = int(sys.argv[1]); nbuf = 64; reps = 24
mode = sys.argv[2] if len(sys.argv) > 2 else "zero"
x0, w, eps = make_inputs_torch({"tokens": tokens, "hidden": 4096}, "bfloat16", 0, "cuda", {"eps": 1e-5})
bufs = [x0.clone() for _ in range(nbuf)]
outs = [None] * nbuf
flush = torch.zeros(512 * 1024**2 // 4, dtype=torch.int32, device="cuda")
for _ in range(20):
    fn(bufs[0], w, eps)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = {i: [] for i in range(nbuf)}
order = [i for i in range(nbuf) for _ in range(reps)]
random.Random(tokens).shuffle(order)
for i in order:
    flush.zero_() if mode == "zero" else flush.sum()
    torch.cuda._sleep(1_000_000)
    start.record(); out = fn(bufs[i], w, eps); end.record(); torch.cuda.synchronize()
    times[i].append(start.elapsed_time(end) * 1e3)
    outs[i] = out
per = [statistics.median(times[i]) for i in range(nbuf)]
allv = [t for i in range(nbuf) for t in times[i]]
first8 = [t for i in range(8) for t in times[i]]
print(json.dumps({"tokens": tokens, "flush": mode, "overall_median_us": round(statistics.median(allv), 4),
                  "first8_median_us": round(statistics.median(first8), 4),
                  "per_buffer_median_us": {"min": round(min(per), 4), "median": round(statistics.median(per), 4), "max": round(max(per), 4)},
                  "x_ptr_mod_2MiB": sorted({b.data_ptr() % (2 << 20) for b in bufs})[:4]}))
