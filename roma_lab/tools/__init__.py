"""What a system's tools call, for any system that calls them (ROMA's executors, the agent):

- the jail for model-written code (``run_python``: bubblewrap, seccomp, a cgroup; design/sandbox.md);
- BM25 retrieval over a corpus (``BM25Retriever``);
- MCP servers (``McpServer``) and the traced tool call, recorded as ``roma_lab.trace.ToolCall``;
- the content-addressed artifact store through which long outputs pass by reference (``ArtifactStore``,
  design/artifacts.md).
"""

from ._artifacts import (
    ArtifactCorruptedError,
    ArtifactError,
    ArtifactMissingError,
    ArtifactStore,
    UntrustedStoreError,
)
from ._calls import (
    McpServer,
    McpServerError,
    ToolCallError,
    ToolFailedError,
    ToolResultError,
    ToolServerGoneError,
    ToolTimeoutError,
    read_artifact,
    run_tools,
)
from ._retrieval import BM25Retriever, EmptyCorpusError, Passage
from ._sandbox import ISOLATION_MODES, SandboxResult, SandboxUnavailableError, check_sandbox, run_python

__all__ = [
    "ISOLATION_MODES",
    "ArtifactCorruptedError",
    "ArtifactError",
    "ArtifactMissingError",
    "ArtifactStore",
    "BM25Retriever",
    "EmptyCorpusError",
    "McpServer",
    "McpServerError",
    "Passage",
    "SandboxResult",
    "SandboxUnavailableError",
    "ToolCallError",
    "ToolFailedError",
    "ToolResultError",
    "ToolServerGoneError",
    "ToolTimeoutError",
    "UntrustedStoreError",
    "check_sandbox",
    "read_artifact",
    "run_python",
    "run_tools",
]
