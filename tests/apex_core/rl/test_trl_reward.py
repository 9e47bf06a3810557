"""TRL's GRPOTrainer with Apex as its reward: the reward function grades a batch of completions at
once and returns the grader's RL rewards in the batch's order (16 at once agree with 16 one by
one), never raises into the trainer, and two real optimisation steps of a tiny causal LM (made
from a config here, nothing downloaded) log the rewards it returned."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from apex_core.executors import make_executor
from apex_core.grader.options import GradeOptions
from apex_core.rl import NO_SOLUTION_REWARD, extract_code
from apex_core.rl.trl_reward import ApexReward, apex_prompts
from apex_core.score import RL_REWARD_FOR_OUTCOME

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
CANNED = (REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py").read_text()
WRONG = "def rms_norm(x, weight, eps):\n    return x.copy()\n"
BROKEN = "def rms_norm(x, weight, eps)\n    return x\n"


def _fenced(code: str, label: str = "python") -> str:
    return f"Here is my kernel.\n```{label}\n{code}```\nDone."


@pytest.fixture(scope="module")
def reward():
    with make_executor("local") as local:
        yield ApexReward(local, options=GradeOptions(timing=False))


def test_the_last_fenced_block_in_the_tasks_language_is_the_solution():
    assert extract_code(_fenced(WRONG)) == WRONG
    assert extract_code("```python\nold = 1\n```\nthen\n```\nnew = 2\n```") == "new = 2\n"
    assert extract_code([{"role": "assistant", "content": _fenced(CANNED)}]) == CANNED
    assert extract_code("```cpp\nint main() {}\n```") is None  # a C++ block is not a Python task's answer
    assert extract_code("no code at all") is None


def test_sixteen_completions_graded_at_once_get_the_verdicts_they_get_one_by_one(reward):
    kinds = [_fenced(CANNED), _fenced(WRONG), _fenced(BROKEN), "I could not write it."]
    completions = [kinds[i % 4] for i in range(16)]
    at_once = reward(prompts=["p"] * 16, completions=completions, task_id=[TASK] * 16)
    one_by_one = [reward(prompts=["p"], completions=[c], task_id=[TASK])[0] for c in completions]
    assert at_once == one_by_one
    assert at_once[:4] == [0.5, RL_REWARD_FOR_OUTCOME["wrong_answer"], RL_REWARD_FOR_OUTCOME["compile_error"], NO_SOLUTION_REWARD]


def test_a_bad_row_or_a_closed_executor_gives_no_reward_and_never_raises():
    local = make_executor("local")
    apex = ApexReward(local, options=GradeOptions(timing=False))
    assert apex(prompts=["p"], completions=[_fenced(CANNED)], task_id=["no-such-task"]) == [None]
    assert apex(prompts=["p"], completions=[_fenced(CANNED)]) == [None]  # no task_id column
    local.close()
    assert apex(prompts=["p"], completions=[_fenced(WRONG)], task_id=[TASK]) == [None]
    assert len(apex.grader.problems) == 3, apex.grader.problems


def _tiny_model_and_tokenizer(texts: list[str]):
    """A byte-level BPE tokenizer trained on ``texts`` and a one-layer Llama of a few MB."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<pad>", "<eos>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=16384, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    return LlamaForCausalLM(config), tokenizer


@pytest.mark.slow
@pytest.mark.site_packages  # builds a Llama from transformers, which the group's tests patch
def test_grpo_trains_two_steps_on_a_tiny_model_with_the_apex_reward_logged(reward, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    dataset = apex_prompts([TASK], repeat=4)
    model, tokenizer = _tiny_model_and_tokenizer([row["prompt"] for row in dataset] + [CANNED])
    config = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_completion_length=8,
                        max_steps=2, logging_steps=1, learning_rate=1e-3, report_to=[], use_cpu=True, save_strategy="no",
                        bf16=False, seed=0)
    seen: list[list[float | None]] = []

    def apex_reward(**batch):  # the Apex reward, with what it returned to the trainer kept
        seen.append(reward(**batch))
        return seen[-1]

    trainer = GRPOTrainer(model=model, reward_funcs=[apex_reward], args=config, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    logged = [row["rewards/apex_reward/mean"] for row in trainer.state.log_history if "rewards/apex_reward/mean" in row]
    assert len(logged) == 2 and trainer.state.global_step == 2
    returned = [sum(r) / len(r) for r in seen if all(v is not None for v in r)]
    assert all(any(math.isclose(value, mean, abs_tol=1e-6) for mean in returned) for value in logged), (logged, seen)
