"""The typed configuration schema (spec §8.2). Unknown keys are ignored."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from soulwire.config.loader import ConfigError
from soulwire.config.precheck import (
    BACKGROUND_MINIMUMS,
    COMPACTION_RATIO_RANGE,
    HOOK_TIMEOUT_RANGE,
    LOOP_CONTROL_MINIMUMS,
)
from soulwire.wire.budget import Budget
from soulwire.wire.hook_events import HOOK_EVENTS
from soulwire.wire.pricing import ModelPrice, parse_prices
from soulwire.wire.session_settings import ApprovalMode, OverlayMode, SandboxMode


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ProviderConfig(_Section):
    type: str
    """`kimi`, `openai_legacy`, `openai_responses`, `anthropic`, `gemini`/`google_genai`;
    `_scripted_echo`/`_echo` are the offline test models."""
    base_url: str = ""
    """The API's address; empty for the provider's default. Point `openai_legacy` at vLLM, llama.cpp,
    Ollama …"""
    api_key: str = Field(default="", repr=False)
    """The key; empty to use the environment (`KIMI_API_KEY`, `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
    `GEMINI_API_KEY`, or `SOULWIRE_API_KEY`). Never logged or written to session files."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set for this provider (the offline models read their scripts file from here)."""
    custom_headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers sent with every request."""
    reasoning_key: str | None = None
    oauth: dict[str, Any] | None = None


class ModelConfig(_Section):
    provider: str
    """The `[providers.NAME]` table that serves this model."""
    model: str
    """The provider's model name, e.g. `claude-sonnet-4-5`."""
    max_context_size: int = Field(default=262_144, ge=1)
    """Tokens the model can take; compaction keeps the context under it."""
    capabilities: list[str] = Field(default_factory=list)
    """`thinking`, `always_thinking`, `image_in`, `video_in`, …: what the model accepts."""
    display_name: str | None = None

    @field_validator("capabilities", mode="before")
    @classmethod
    def _capabilities_list(cls, value: Any) -> Any:
        # The Go SDK serialises capabilities as {"image_in": true}; accept that shape too.
        if isinstance(value, dict):
            return [k for k, v in value.items() if v]
        return value


class LoopControl(_Section):
    max_steps_per_turn: int = Field(
        default=1000,
        ge=LOOP_CONTROL_MINIMUMS["max_steps_per_turn"],
        validation_alias=AliasChoices("max_steps_per_turn", "max_steps_per_run"),
    )
    """Model calls one turn may make before it stops (`--max-steps-per-turn`)."""
    max_retries_per_step: int = Field(default=3, ge=LOOP_CONTROL_MINIMUMS["max_retries_per_step"])
    """Retries of a failed model call (connection, timeout, 429/5xx) before the step fails."""
    max_ralph_iterations: int = Field(default=0, ge=LOOP_CONTROL_MINIMUMS["max_ralph_iterations"])
    """kimi's Ralph-loop iterations (0: off); accepted for compatibility, not used yet."""
    reserved_context_size: int = Field(default=50_000, ge=LOOP_CONTROL_MINIMUMS["reserved_context_size"])
    """Tokens kept free for the model's answer; compaction starts before the context eats into them."""
    compaction_trigger_ratio: float = Field(
        default=0.85, ge=COMPACTION_RATIO_RANGE[0], le=COMPACTION_RATIO_RANGE[1]
    )
    """Compact the context when it is this full (a fraction of `max_context_size`)."""


class BackgroundConfig(_Section):
    """`[background]`: limits of background tasks (spec §8.2); the reference's keys for its
    worker processes (heartbeats, polling) are accepted and ignored: ours are watched in the
    engine itself."""

    max_running_tasks: int = Field(default=4, ge=BACKGROUND_MINIMUMS["max_running_tasks"])
    read_max_bytes: int = Field(default=30_000, ge=BACKGROUND_MINIMUMS["read_max_bytes"])
    notification_tail_lines: int = Field(default=20, ge=BACKGROUND_MINIMUMS["notification_tail_lines"])
    notification_tail_chars: int = Field(default=3_000, ge=BACKGROUND_MINIMUMS["notification_tail_chars"])
    kill_grace_period_ms: int = Field(default=2_000, ge=BACKGROUND_MINIMUMS["kill_grace_period_ms"])
    print_wait_ceiling_s: int = Field(default=3_600, ge=BACKGROUND_MINIMUMS["print_wait_ceiling_s"])
    """The longest `--print` waits, after its prompt, for background tasks still at work."""
    agent_task_timeout_s: int = Field(default=900, ge=BACKGROUND_MINIMUMS["agent_task_timeout_s"])
    """How long a background sub-agent started without its own `timeout` may run."""
    keep_alive_on_exit: bool = False
    """Background commands outlive the session: its end (and `--print`'s) leaves them running
    instead of stopping them. Background agents run inside the engine and still end with it."""


class CheckpointsConfig(_Section):
    """Checkpoints of the workspace at turn and step boundaries (rewind, fork with its own
    files, what a turn changed)."""

    enabled: StrictBool = False
    exclude: list[str] | None = None
    """gitignore-style patterns left out besides each `.gitignore`; absent: `.git`, `.hg`,
    `.svn`, `node_modules`, `__pycache__`, `.venv`, `venv`, `.tox`, `.mypy_cache`,
    `.pytest_cache`, `.ruff_cache`, `dist`, `build`, `target`, `.next`."""
    max_file_bytes: int = Field(default=10 << 20, ge=0)
    """A larger file is not stored (the checkpoint reports it, a rewind leaves it as it is)."""
    max_checkpoint_bytes: int = Field(default=512 << 20, ge=0)
    """New bytes one checkpoint may store; files past it are reported as skipped."""
    writing_tools: list[str] = Field(default_factory=list)
    """Names (shell-style patterns) of plugin and MCP tools that write files: a step calling
    one is checkpointed first, as for WriteFile, StrReplaceFile and Shell."""


class ServiceConfig(_Section):
    """`[services.moonshot_search]` / `[services.moonshot_fetch]`: a web search or fetch service
    (spec §8.2); its key is `api_key`, or the token of `soulwire login` named by `oauth`."""

    base_url: str = Field(min_length=1)
    api_key: str = Field(default="", repr=False)
    custom_headers: dict[str, str] = Field(default_factory=dict)
    oauth: dict[str, Any] | None = None


class ServicesConfig(_Section):
    moonshot_search: ServiceConfig | None = None
    """Enables the SearchWeb tool."""
    moonshot_fetch: ServiceConfig | None = None
    """FetchURL asks this service first, and fetches directly when it fails."""


class HookConfig(_Section):
    """One `[[hooks]]` entry: a shell command run at `event` when `matcher` (a regex on the
    event's target, e.g. the tool name) matches; exit code 2 blocks (spec §4.12)."""

    event: str
    command: str = Field(min_length=1)
    matcher: str = ""
    timeout: int = Field(default=30, ge=HOOK_TIMEOUT_RANGE[0], le=HOOK_TIMEOUT_RANGE[1])

    @field_validator("event")
    @classmethod
    def _known_event(cls, value: str) -> str:
        if value not in HOOK_EVENTS:
            raise ValueError(f"unknown hook event {value!r}; one of: {', '.join(HOOK_EVENTS)}")
        return value


class Config(_Section):
    default_model: str = ""
    """The `[models]` alias sessions use unless `--model` names another."""
    # Strict: "no" or 1 is a mistake to report, not a switch to guess (config/precheck.py).
    default_thinking: StrictBool = False
    """Start sessions with thinking on (`--thinking`/`--no-thinking` win)."""
    default_yolo: StrictBool = False
    """Approve every tool action without asking (`--yolo`)."""
    default_plan_mode: StrictBool = False
    """Start sessions in plan mode (`--plan`)."""
    skip_afk_prompt_injection: StrictBool = False
    theme: Literal["dark", "light"] = "dark"
    """The terminal UI's colours for a dark or a light terminal background."""
    show_thinking_stream: StrictBool = True
    """The terminal UI shows the model's thinking as it streams; false: a `Thinking…` indicator,
    then one line saying how long it thought."""
    default_editor: str = ""
    """The terminal UI's external editor (Ctrl-X Ctrl-E), as a command line (`code --wait`);
    empty: `$VISUAL`, then `$EDITOR`."""
    telemetry: StrictBool = True
    extra_skill_dirs: list[str] = Field(default_factory=list)
    """More skill directories, besides `--skills-dir`."""
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    """The `[providers.NAME]` tables, below."""
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    """The `[models.ALIAS]` tables, below."""
    loop_control: LoopControl = Field(default_factory=LoopControl)
    hooks: list[HookConfig] = Field(default_factory=list)
    """The `[[hooks]]` entries, below."""
    background: BackgroundConfig = Field(default_factory=BackgroundConfig)
    mcp: dict[str, Any] = Field(default_factory=dict)
    """MCP client settings: `[mcp.client] tool_call_timeout_ms`. The servers are in `mcp.json` or
    `--mcp-config-file`."""
    services: ServicesConfig = Field(default_factory=ServicesConfig)
    checkpoints: CheckpointsConfig = Field(default_factory=CheckpointsConfig)
    approval_scope: Literal["exact", "action"] = "exact"
    """`exact`: approve-for-session remembers the command or file the user saw; `action`:
    the reference's behaviour (every later call with the same action string)."""
    approval: ApprovalMode = "ask"
    """`ask`: every action that needs approval is asked; `on-escape`: with a sandbox, actions
    that stay inside it run without asking, and only leaving it is asked."""
    sandbox: SandboxMode = "off"
    """Where Shell commands and file tools may act (bubblewrap on Linux); `--sandbox` wins."""
    overlay: OverlayMode = "off"
    """With a sandbox, each turn runs in an overlay whose changes are committed (`commit`),
    thrown away (`discard`) or kept pending until the user chooses (`ask`); `--overlay` wins."""
    sandbox_network: StrictBool = False
    """Whether commands in a sandbox may use the network; `--sandbox-network` wins."""
    budgets: Budget = Field(default_factory=Budget)
    """`[budgets.turn]`, `[budgets.session]`, `[budgets.tree]`: limits on `usd`, `tokens`,
    `time_s` and `tool_calls`; `[budgets] warn_at`, `running_tools` (the `--budget-*` flags win)."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict[str, ModelPrice])
    """`[prices.MODEL] input/output/cache_read/cache_write`, USD per million tokens, by the
    provider's model name (`"*"`: any model), over the built-in list prices."""

    @field_validator("prices", mode="before")
    @classmethod
    def _price_table(cls, value: Any) -> Any:
        return parse_prices(value)

    @model_validator(mode="after")
    def _references_exist(self) -> Config:
        if self.default_model and self.default_model not in self.models:
            raise ValueError(f"default_model {self.default_model!r} is not a key of [models]")
        for alias, model in self.models.items():
            if model.provider not in self.providers:
                raise ValueError(f"model {alias!r} uses unknown provider {model.provider!r}")
        return self


def validate_config(raw: dict[str, Any], origin: object = None) -> Config:
    """Validate a raw mapping; errors become ConfigError with a one-line message naming the
    origin (the file, or `--config`) and the keys."""
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'configuration'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{origin or 'configuration'}: {problems}") from None
