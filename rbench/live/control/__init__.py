"""Progress and stop signals between executor tasks and the Spark driver (the coordinator).

Spark only reports a task's result when it ends; a 30-minute capacity run needs a
status line every second and a way to stop cleanly. Each task opens one TCP
connection to the driver and sends JSON lines (progress deltas, once a second);
the driver answers with a single `stop` line to every task when the user presses
Ctrl-C or sends SIGTERM, and the tasks then flush their samples and commit.
The channel is best-effort: a task that cannot reach the driver still runs.

The same channel is the start gate (gate.py), and carries pause/resume of the consumers.

Spark restarts a barrier stage as a whole when one of its tasks is lost (docs/cluster.md, "When
an executor dies"). Every line a task sends carries its Spark task attempt id, so the driver
tells the attempts apart: the gate opens for one attempt's tasks only, and only after the
attempt before it has left; the progress of the superseded attempt stops counting, and the
driver keeps, per task attempt, what it reported and how it ended (for run.json).

Only the run's own tasks may speak: every connection answers an HMAC challenge with the run's secret
(carried in the TaskPlan) and every line carries a MAC; strangers are hung up on and noted for run.json
(docs/cluster.md, "Security").

Modules: wire (the lines as typed records), auth (the handshake and the line MACs), tls (optional TLS,
the certificate pinned), refusals (who was turned away), board (what the driver knows), gate (the start
gate), server (the driver's end), client (the task's end). The names below are the package's interface.
"""
from rbench.live.control.board import COUNTED, ProgressBoard, StartRound, StepProgress, TaskAttempt
from rbench.live.control.client import ControlClient
from rbench.live.control.gate import GATE_MARGIN_NS, gate_margin_ns
from rbench.live.control.server import ControlServer

__all__ = ["COUNTED", "GATE_MARGIN_NS", "gate_margin_ns", "ControlClient", "ControlServer", "ProgressBoard", "StartRound", "StepProgress",
           "TaskAttempt"]
