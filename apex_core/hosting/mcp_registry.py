"""The one list of Apex's MCP servers and the tools each declares.

Host configurations (.mcp.json, Cursor, Codex), the gateway server, ``apex mcp list|serve`` and
the prompts' tool tables are all made from this list, so nothing can advertise a server or tool
that does not exist. ``apex_core`` cannot import the servers (they depend on MCP), so each entry
restates its tool names as data; a test compares them with the tools the real servers list.

Adding a server is one entry here plus its module under ``servers/`` exposing ``mcp``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from apex_core.errors import UnknownNameError

NAME_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
"""Server names: what hosts show and prefix tools with (``mcp__<server>__<tool>`` in Claude Code)."""
TOOL_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
GPU_ENVIRONMENT = (
    "APEX_CACHE_DIR", "APEX_SOURCE_CACHE_DIR", "APEX_TASK_DIRS", "APEX_SANDBOX_USER", "XDG_CACHE_HOME",
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ROCM_PATH", "CUDA_HOME",
    "LD_LIBRARY_PATH", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR",
)
"""What a server that grades or profiles on a GPU reads: Apex's own settings, device selection,
toolkit locations and compiler caches."""

AGENT_ENVIRONMENT = (
    "CODEX_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR",
    "CURSOR_API_KEY",
)
"""Where the agent CLIs the pipeline starts (codex, claude, Cursor's agent) find their configuration
and credentials. Under Codex, which passes a stdio server only an allow-list, a pipeline started
through MCP would otherwise start an inner agent that cannot log in unless its credentials sit in
the default folder under HOME."""


class ToolSummary(BaseModel):
    """One tool as agents and host configs need to know it, without importing the server."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=TOOL_PATTERN)
    when_to_use: str = Field(min_length=10)
    timeout_s: int = Field(default=60, ge=1, le=24 * 3600)
    """How long one call may legitimately take on the target machine; hosts that cut tool calls
    short (Codex defaults to 60 s) get at least this much."""
    read_only: bool = False
    """The tool changes nothing of the user's (it may write Apex's own caches): the server marks it
    ``readOnlyHint``, so that hosts may run it without asking (Cursor's Ask mode runs only these)."""


class ToolProbe(BaseModel):
    """A cheap, side-effect-free call that proves a server works end to end (conformance tests and
    deployment checks make it); arguments are strings so that every client can pass them."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, str] = {}
    expect_key: str
    """A key the structured result must contain."""


class ServerSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=48)
    module: str = Field(pattern=r"^servers(\.[a-z_][a-z0-9_]*)+$")
    """Importable module that defines the FastMCP server as ``mcp`` and runs it as ``__main__``."""
    description: str
    tools: tuple[ToolSummary, ...]
    env: dict[str, str] = {}
    """Environment the server needs beyond what hosts pass through (written into every host config)."""
    pass_env: tuple[str, ...] = ()
    """Variables the server reads from the user's environment when they are set. Claude Code and
    Cursor pass their whole environment to stdio servers; Codex passes an allow-list, so these
    go into its ``env_vars``."""
    namespace: str = Field(default="", pattern=r"^([a-z][a-z0-9]*)?$")
    """Prefix of this server's tools under the gateway (``grader_grade_solution``); default: the
    name without its ``apex-`` prefix."""
    startup_timeout_s: int = Field(default=30, ge=1, le=600)
    probe: ToolProbe | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_namespace(cls, data: object) -> object:
        if isinstance(data, dict) and not data.get("namespace") and isinstance(data.get("name"), str):
            data = {**data, "namespace": data["name"].removeprefix("apex-").replace("-", "")}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ServerSpec:
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"server {self.name!r} lists a tool twice: {names}")
        if self.probe is not None and self.probe.tool not in names:
            raise ValueError(f"server {self.name!r} probes {self.probe.tool!r}, which it does not list")
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tool_timeout_s(self) -> int:
        """The longest of the tools' timeouts: hosts with one timeout per server get this one."""
        return max((tool.timeout_s for tool in self.tools), default=60)


SERVERS: tuple[ServerSpec, ...] = (
    ServerSpec(
        name="apex-grader",
        module="servers.grader",
        description="Grades kernel solutions out of process: correctness, interleaved timing, score, RL reward.",
        tools=(
            ToolSummary(name="check_correctness", timeout_s=900, read_only=True,
                        when_to_use="check a solution on every test and hidden shape, no timing (fast, while iterating)"),
            ToolSummary(name="grade_solution", timeout_s=1800, read_only=True,
                        when_to_use="the full verdict: correctness, timing against the baseline, score"),
            ToolSummary(name="benchmark", timeout_s=1800, read_only=True,
                        when_to_use="time a solution against the baseline on the benchmark shapes"),
            ToolSummary(name="compare", timeout_s=3600, read_only=True,
                        when_to_use="grade several solutions of one task and rank them"),
            ToolSummary(name="hardware_spec", timeout_s=30, read_only=True,
                        when_to_use="the target GPU's peak numbers with sources, for roofline estimates"),
        ),
        pass_env=GPU_ENVIRONMENT,
        probe=ToolProbe(tool="hardware_spec", arguments={"gpu": "mi355x"}, expect_key="spec"),
    ),
    ServerSpec(
        name="apex-profiler",
        module="servers.profiler",
        description="End-to-end workloads: benchmark tokens/s and profile where the device time goes.",
        tools=(
            ToolSummary(name="list_workloads", timeout_s=30, read_only=True,
                        when_to_use="see which workloads (model, stack, sizes) this machine can run"),
            ToolSummary(name="benchmark_workload", timeout_s=3600,
                        when_to_use="measure a workload end to end: tokens/s, latency percentiles, CV, drift"),
            ToolSummary(name="profile_workload", timeout_s=3600,
                        when_to_use="find where a workload's time goes: kernel table and trace"),
        ),
        pass_env=GPU_ENVIRONMENT,
        probe=ToolProbe(tool="list_workloads", expect_key="workloads"),
    ),
    ServerSpec(
        name="apex-identifier",
        module="servers.identifier",
        description="Identifies a profiled workload's hot kernels: kind, source, patchability, task, shapes.",
        tools=(
            ToolSummary(name="identify_kernels", timeout_s=1800,
                        when_to_use="after profiling: what each hot kernel is, its source, task and call shapes"),
            ToolSummary(name="find_kernel_source", timeout_s=300, read_only=True,
                        when_to_use="locate one kernel's definition by the name a profiler shows"),
        ),
        pass_env=GPU_ENVIRONMENT,
        probe=ToolProbe(tool="find_kernel_source", arguments={"name": "_rms_norm_forward_kernel"}, expect_key="found"),
    ),
    ServerSpec(
        name="apex-source",
        module="servers.source",
        description="Reads the installed stack's kernels (find, source, callers, callees, launch sites, grep) and searches the docs.",
        tools=(
            ToolSummary(name="find_kernel", timeout_s=300, read_only=True,
                        when_to_use="where a kernel named in a profile is defined, with its package version and launchers"),
            ToolSummary(name="read_source", timeout_s=120, read_only=True,
                        when_to_use="numbered source of a kernel, a launcher or any path:line another tool returned"),
            ToolSummary(name="find_callers", timeout_s=300, read_only=True,
                        when_to_use="where a kernel is launched or a function called (the call path a patch must keep)"),
            ToolSummary(name="find_callees", timeout_s=120, read_only=True,
                        when_to_use="what a kernel or launcher calls and launches"),
            ToolSummary(name="list_launch_sites", timeout_s=120, read_only=True,
                        when_to_use="the grid, arguments and meta-parameters each launch passes a kernel"),
            ToolSummary(name="grep_source", timeout_s=300, read_only=True,
                        when_to_use="find reference kernels that use an instruction, layout or idiom"),
            ToolSummary(name="search_docs", timeout_s=300, read_only=True,
                        when_to_use="skills, docs, hardware facts and AMD PDFs on a question, each passage with its source"),
            ToolSummary(name="hardware_facts", timeout_s=30, read_only=True,
                        when_to_use="a GPU's numbers (CUs, LDS, caches, bandwidth, peak FLOP/s) with units and sources"),
        ),
        pass_env=("APEX_CACHE_DIR", "APEX_SOURCE_CACHE_DIR", "APEX_DOCS_INDEX", "APEX_SOURCE_CHECKOUTS", "XDG_CACHE_HOME"),
        probe=ToolProbe(tool="find_kernel", arguments={"name": "_rms_norm_forward_kernel"}, expect_key="found"),
    ),
    ServerSpec(
        name="apex-patcher",
        module="servers.patcher",
        description="Patches graded winners into the installed stack (journaled, crash-safe) and benchmarks the model again.",
        tools=(
            ToolSummary(name="apply_patch", timeout_s=1800,
                        when_to_use="put one graded solution into the installed stack, checked inside the model"),
            ToolSummary(name="integrate_winners", timeout_s=3600,
                        when_to_use="patch in the winners of a folder of gradings"),
            ToolSummary(name="patch_status", timeout_s=60, read_only=True,
                        when_to_use="see what is patched in this environment"),
            ToolSummary(name="restore_patches", timeout_s=600,
                        when_to_use="undo every patch, byte for byte"),
            ToolSummary(name="check_accuracy", timeout_s=3600,
                        when_to_use="compare the patched model with the original and roll back patches that change its outputs"),
            ToolSummary(name="run_final_benchmark", timeout_s=3600,
                        when_to_use="the model's tokens/s with and without the patches, with the change's interval"),
        ),
        pass_env=GPU_ENVIRONMENT,
        probe=ToolProbe(tool="patch_status", expect_key="patched"),
    ),
    ServerSpec(
        name="apex-pipeline",
        module="servers.pipeline",
        description="Runs the whole pipeline of a model (apex run): bottleneck kernels optimized by an agent, integrated, measured.",
        tools=(
            ToolSummary(name="run_pipeline", timeout_s=14400,
                        when_to_use="optimize a model's bottleneck kernels end to end (benchmark to report) in one call"),
            ToolSummary(name="list_runs", timeout_s=60, read_only=True,
                        when_to_use="the pipeline runs so far, newest first"),
            ToolSummary(name="pipeline_status", timeout_s=60, read_only=True,
                        when_to_use="a run's stages, kernels, figures and reports"),
            ToolSummary(name="show_leaderboard", timeout_s=60, read_only=True,
                        when_to_use="compare agents and models across runs"),
            ToolSummary(name="export_rl_dataset", timeout_s=600,
                        when_to_use="tasks, trajectories and SFT pairs of all runs as datasets"),
            ToolSummary(name="past_experiments", timeout_s=60, read_only=True,
                        when_to_use="what earlier gradings of a task measured: best speedups and strategies, failures"),
        ),
        pass_env=GPU_ENVIRONMENT + AGENT_ENVIRONMENT,
        probe=ToolProbe(tool="list_runs", expect_key="runs"),
    ),
)
"""Each server adds one entry here; host configs and prompt tool tables are generated from it."""


def _gateway() -> ServerSpec:
    """One server mounting all of ``SERVERS`` for hosts that want a single entry; each server's
    tools appear under its namespace (``grader_grade_solution``)."""
    tools = tuple(
        tool.model_copy(update={"name": f"{server.namespace}_{tool.name}"}) for server in SERVERS for tool in server.tools
    )
    probe = next(
        (s.probe.model_copy(update={"tool": f"{s.namespace}_{s.probe.tool}"}) for s in SERVERS if s.probe is not None), None
    )
    return ServerSpec(
        name="apex",
        module="servers.gateway",
        description="Every Apex server behind one entry, each server's tools prefixed with its namespace.",
        tools=tools,
        pass_env=tuple(dict.fromkeys(name for server in SERVERS for name in server.pass_env)),
        env={key: value for server in SERVERS for key, value in server.env.items()},
        namespace="gateway",
        probe=probe,
    )


GATEWAY = _gateway()


def tool_names() -> list[str]:
    """Tool names as Claude Code shows them to the model (``mcp__<server>__<tool>``)."""
    return [f"mcp__{server.name}__{tool.name}" for server in SERVERS for tool in server.tools]


def all_servers(include_gateway: bool = True) -> tuple[ServerSpec, ...]:
    return (*SERVERS, GATEWAY) if include_gateway else SERVERS


def get_server(name: str) -> ServerSpec:
    """A registered server (or the gateway) by name; a one-line error naming the known ones otherwise."""
    for server in all_servers():
        if server.name == name:
            return server
    raise UnknownNameError("MCP server", name, [s.name for s in all_servers()])


def check_registry(servers: tuple[ServerSpec, ...] | None = None) -> None:
    """Names, modules and gateway namespaces must be unique, or hosts would silently merge entries."""
    servers = SERVERS if servers is None else servers
    for attribute in ("name", "module", "namespace"):
        values = [getattr(server, attribute) for server in (*servers, GATEWAY)]
        duplicates = sorted({value for value in values if values.count(value) > 1})
        if duplicates:
            raise ValueError(f"two registered MCP servers share a {attribute}: {', '.join(duplicates)}")


check_registry()  # a registry that hosts would silently merge fails at import, in every process
