"""One arm of the accuracy gate, in a confined child: ``python -m apex_core.patcher.accuracy_worker
--apex-channel R,W`` (started by ``accuracy.run_arm`` through ``apex_core.grader.isolation.confined``).

The child builds the workload's model exactly as the workload does (``apex_core.workloads.load``:
its kernel stacks, its random weights from the spec's seed), with whatever the environment holds at
that moment: nothing patched for the original arm, a patch set for a patched one. It runs the fixed
prompts once through the model (the prefill, every prompt row at once), then decodes greedily one
token per prompt per step through the KV cache, and saves, as plain tensors in its scratch folder:

- ``prefill``: float32 ``(prompts, positions, vocab)``, the logits at the prompt positions asked for
  (the last one always among them);
- ``decode``: float32 ``(prompts, tokens, vocab)``, the logits of each decode step;
- ``tokens``: int64 ``(prompts, tokens + 1)``, the greedy tokens: the prefill's, then one per step.

Why both phases: a kernel sees different shapes in each (cpu-mini's norm gets every prompt row at
once in the prefill and one row per prompt in a decode step), and an error that only shows at some
row counts shows in one of them. Decode runs eagerly over transformers' dynamic cache: the patched
kernels are the same code the workload's graphs replay, and eager decode needs no capture.

The parent reads the file with torch's tensors-only loader and decides everything; the reply on the
private channel only says whether the child got that far, and why not.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

OUTPUTS_FILE = "arm.pt"


def run_arm(spec_data: dict[str, Any], prompts: int, tokens: int, positions: list[int], request_seed: int,
            outputs_file: str) -> None:
    """Build the model, run the prompts and the greedy decode, save the tensors to ``outputs_file``."""
    import torch

    from apex_core.workloads import load
    from apex_core.workloads.requests import prompt_ids
    from apex_core.workloads.spec import WorkloadSpec

    spec = WorkloadSpec.model_validate(spec_data)
    if spec.model == "cpu-mini":
        torch.set_num_threads(1)  # as the workload steps it: the same reduction order in both arms
    loaded = load(spec)
    try:
        model = loaded.model
        cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        vocab = int(model.config.vocab_size)
        prompt = prompt_ids(vocab, prompts, spec.prompt_tokens, request_seed).to(spec.device)
        with torch.inference_mode():
            out = model(input_ids=prompt, use_cache=True)
            logits = out.logits
            prefill = logits[:, positions, :].float().cpu()
            token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            cache = _cache_of(out)
            del out, logits
            chosen, steps = [token], []
            for _ in range(tokens):
                out = model(input_ids=token, use_cache=True, **{cache_arg: cache})
                cache = _cache_of(out) or cache
                step = out.logits[:, -1, :]
                steps.append(step.float().cpu())
                token = step.argmax(dim=-1, keepdim=True)
                chosen.append(token)
        torch.save({"prefill": prefill.contiguous(), "decode": torch.stack(steps, dim=1).contiguous(),
                    "tokens": torch.cat(chosen, dim=1).to(device="cpu", dtype=torch.int64).contiguous()}, outputs_file)
    finally:
        loaded.close()


def _cache_of(out: Any) -> Any:
    for name in ("cache", "past_key_values"):  # transformers 5.24 names it cache; earlier 5.x past_key_values
        value = getattr(out, name, None)
        if value is not None:
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    """One 'run' request, one reply (``ok``, or ``message`` saying what failed and ``user_error`` when it
    is the workload's own one-line refusal, e.g. a kernel stack this machine cannot run), then exit."""
    import warnings

    from apex_core.grader import ParentChannel

    warnings.simplefilter("ignore")  # transformers' deprecation notes would only fill the log
    channel, _ = ParentChannel.from_argv(list(sys.argv[1:] if argv is None else argv))
    request = channel.receive()
    if request is None or request.get("op") != "run":
        return 1
    try:
        run_arm(request["spec"], int(request["prompts"]), int(request["tokens"]), [int(p) for p in request["positions"]],
                int(request["request_seed"]), os.path.join(os.environ["HOME"], OUTPUTS_FILE))
    except BaseException as error:  # noqa: BLE001 - patched code may raise anything, on import or in a step
        from apex_core.errors import ApexUserError

        said = str(error) if isinstance(error, ApexUserError) else f"{type(error).__name__}: {error}"
        channel.reply({"ok": False, "message": said[:600], "user_error": isinstance(error, ApexUserError)})
        return 1
    channel.reply({"ok": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
