"""Fail-closed single-task dispatch (R-DISP-1..R-DISP-4): `agentcompass dispatch SPEC.yaml`.

One prompt, one tool agent run, and evidence that either closes completely or says exactly what failed:

    run_id: fix-readme-typo            # optional (or --run-id); default dispatch-<UTC time>-<6 hex>
    prompt: "Fix the typo in README.md, then submit a JSON summary."
    system_prompt: "You are ..."       # optional; default: the tool agent's
    files: ./repo                      # optional directory copied into the agent's working dir
    model: my-model                    # <resources>/models/<id>.yaml, or an inline model declaration
    environment: local                 # <resources>/environments/<id>.yaml, a provider id, or inline
    agent: {command_timeout_s: 60}     # tool_agent params; checkpoints default off
    limits: {max_turns: 20, max_cost_usd: 1.0}   # the agent's budget, as in a sweep's execution.limits
    output_schema: summary.schema.json # optional JSON Schema (Draft 2020-12) the final answer must meet
    runs_dir: results/dispatch         # optional (or --runs-dir); relative to the current directory

``files`` and ``output_schema`` are relative to the spec's directory; ``<resources>`` is the spec's
directory, or its parent when that is named ``dispatch`` (``resources/dispatch/x.yaml`` names the
declarations of ``resources/``). The agent's task id is always ``dispatch``: a scripted model answers
it from ``params.turns.dispatch`` (or ``"*"``).

Flow, every step fail-closed: load and validate the spec -> refuse secrets in the prompts before any
model call -> check the run id -> reserve ``<runs_dir>/<run_id>`` atomically -> write the inputs ->
ledger ``run.started`` -> run the agent, every activity record also a ledger event -> read the raw
transcript back (a secret deletes it) -> one record per model turn -> validate the structured output ->
final message, output, dependencies -> ``run.completed`` -> receipt.

The run directory:

    spec.yaml, system.txt, prompt.txt    the inputs (redacted copies)
    events.jsonl                         the ledger: run.*, agent.<kind>.<status> (redacted, fsynced)
    agent/activity.jsonl                 the raw transcript, unredacted; deleted with agent/ if it holds a secret
    turns/0001.json ...                  per model turn: model id, usage, cost, stop reason, duration
    final-message.txt, output.json       the final answer and the (schema-validated) output
    dependencies.json                    one entry per tool call: seq, tool, args, isError
    receipt.json                         the receipt, also printed; written for every outcome of a run
                                         directory this dispatch created

Exit codes (R-DISP-2): 0 completed; 2 SPEC_INVALID, RUN_ID_INVALID; 3 the agent did not complete:
AGENT_LIMIT_EXCEEDED (it reached a limit, named in the error), MODEL_FAILED (the endpoint failed), AGENT_FAILED
(it broke the tool protocol), FRAMEWORK_FAILED (this framework failed), TRANSCRIPT_EMPTY;
4 OUTPUT_SCHEMA_INVALID; 5 RUN_ID_EXISTS, AUDIT_WRITE_FAILED, RAW_SECRET_DETECTED, EVIDENCE_PERSIST_FAILED.

The package: ``spec`` (the declaration and what it resolves to), ``ledger`` (events.jsonl), ``evidence``
(what is read back and derived from the transcript), ``receipt``, ``codes`` (exit and error codes) and
``run`` (the flow above). May import the runtime's execution and everything below it; never
the Dagster layer, the command or the reporting.
"""

from agentcompass_dagster.dispatch.run import dispatch, run_dispatch

__all__ = ["dispatch", "run_dispatch"]
