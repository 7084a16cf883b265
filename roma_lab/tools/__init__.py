"""What a system's tools call, for any system that calls them (ROMA's executors, the agent):

- the jail for model-written code (``run_python``: bubblewrap, seccomp, a cgroup; design/sandbox.md),
  and two of its parts on their own for a benchmark to time (``Cgroup``, ``seccomp_program``);
- BM25 retrieval over a corpus (``BM25Retriever``);
- MCP servers (``McpServer``) and the traced tool call, recorded as ``roma_lab.trace.ToolCall``;
- the content-addressed artifact store through which long outputs pass by reference (``ArtifactStore``,
  design/artifacts.md).
"""

from ._artifacts import (
    RUN_STORE,
    ArtifactCorruptedError,
    ArtifactError,
    ArtifactMissingError,
    ArtifactStore,
    UntrustedStoreError,
)
from ._calls import (
    RUN_TOOLS,
    TOOL_LOG,
    McpConnections,
    McpServer,
    McpServerError,
    ToolCallError,
    ToolFailedError,
    ToolLog,
    ToolResultError,
    ToolServerGoneError,
    ToolTimeoutError,
    read_artifact,
    record_tool_call,
    run_tools,
    tool_result_limit,
    traced_call,
)
from ._cgroup import Cgroup
from ._retrieval import BM25Retriever, EmptyCorpusError, Passage
from ._sandbox import (
    ISOLATION_MODES,
    SandboxResult,
    SandboxUnavailableError,
    check_sandbox,
    run_python,
    seccomp_program,
)

# A run's context for the tools its executors call (set by the system that runs them, e.g. ROMA's
# controller): its artifact store, its MCP tools and the log each role call's tool calls go to.
__all__ = [
    "ISOLATION_MODES",
    "RUN_STORE",
    "RUN_TOOLS",
    "TOOL_LOG",
    "ArtifactCorruptedError",
    "ArtifactError",
    "ArtifactMissingError",
    "ArtifactStore",
    "BM25Retriever",
    "Cgroup",
    "EmptyCorpusError",
    "McpConnections",
    "McpServer",
    "McpServerError",
    "Passage",
    "SandboxResult",
    "SandboxUnavailableError",
    "ToolCallError",
    "ToolFailedError",
    "ToolLog",
    "ToolResultError",
    "ToolServerGoneError",
    "ToolTimeoutError",
    "UntrustedStoreError",
    "check_sandbox",
    "read_artifact",
    "record_tool_call",
    "run_python",
    "run_tools",
    "seccomp_program",
    "tool_result_limit",
    "traced_call",
]
