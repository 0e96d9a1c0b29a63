"""The configuration form's endpoints and the raw editor's secrets: keys never reach the page in
clear, a save keeps them, comments and keys the form does not know survive, and errors name
the field they are about (validated by the engine's own Config model)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from tests.wire_client import Sandbox

SECRET = "<secret: unchanged>"


def toml_config(sandbox: Sandbox) -> Path:
    sandbox.write()
    path = sandbox.root / "config.toml"
    path.write_text(
        f"""# my settings: keep this comment
default_model = "scripted"
telemetry = false
unknown_top = "kept"  # a key the form does not know

[loop_control]
max_steps_per_turn = 50   # per turn

[providers.scripted_provider]
type = "_scripted_echo"
api_key = "sk-very-secret-1234"
custom_headers = {{ "X-Token" = "header-secret" }}
env = {{ KIMI_SCRIPTED_ECHO_SCRIPTS = "{sandbox.root / "scripts.json"}" }}
reasoning_key = "kept-too"

[models.scripted]
provider = "scripted_provider"
model = "scripted_echo"
max_context_size = 100000

[[hooks]]
event = "Stop"
command = "true"
""",
        encoding="utf-8",
    )
    return path


def test_the_form_shows_settings_without_secrets_and_saves_in_place(serve, sandbox):
    path = toml_config(sandbox)
    server = serve(args=("--config-file", str(path)))
    form = server.api("GET", "/api/web/config/form").json()
    assert form["secret"] == SECRET and form["format"] == "toml"
    values = form["values"]
    assert "sk-very-secret" not in json.dumps(form) and "header-secret" not in json.dumps(form)
    provider = values["providers"]["scripted_provider"]
    assert provider["api_key"] == SECRET and provider["custom_headers"] == {"X-Token": SECRET}
    assert values["loop_control"]["max_steps_per_turn"] == 50
    assert values["loop_control"]["max_retries_per_step"] == 3  # the engine's default, shown
    assert values["default_yolo"] is False and values["models"]["scripted"]["max_context_size"] == 100000
    # The raw editor hides them too, keeping the comments.
    raw = server.api("GET", "/api/web/config").json()["text"]
    assert "sk-very-secret" not in raw and "header-secret" not in raw
    assert "# my settings: keep this comment" in raw and f'api_key = "{SECRET}"' in raw

    values["default_yolo"] = True
    values["loop_control"]["max_steps_per_turn"] = 70
    values["models"]["second"] = {
        "provider": "scripted_provider",
        "model": "kimi-k2",
        "max_context_size": 200000,
        "capabilities": ["thinking"],
        "display_name": "Second <b>model</b>",
    }
    saved = server.api("PUT", "/api/web/config/form", json={"values": values})
    assert saved.status_code == 200, saved.text
    text = path.read_text()
    data = tomllib.loads(text)
    assert data["providers"]["scripted_provider"]["api_key"] == "sk-very-secret-1234"  # kept
    assert data["providers"]["scripted_provider"]["custom_headers"] == {"X-Token": "header-secret"}
    assert data["providers"]["scripted_provider"]["reasoning_key"] == "kept-too"
    assert data["default_yolo"] is True and data["loop_control"]["max_steps_per_turn"] == 70
    assert data["models"]["second"]["model"] == "kimi-k2" and data["unknown_top"] == "kept"
    assert data["hooks"] == [{"event": "Stop", "command": "true"}]
    assert "# my settings: keep this comment" in text and "# a key the form does not know" in text
    assert "max_retries_per_step" not in text  # a default the file did not have stays out
    # The server uses it at once: the new model is offered for new sessions.
    assert "second" in [m["alias"] for m in server.api("GET", "/api/models").json()["models"]]

    # A new key replaces the stored one; removing a model removes its table.
    values = saved.json()["values"]
    values["providers"]["scripted_provider"]["api_key"] = "sk-new"
    del values["models"]["second"]
    assert server.api("PUT", "/api/web/config/form", json={"values": values}).status_code == 200
    data = tomllib.loads(path.read_text())
    assert data["providers"]["scripted_provider"]["api_key"] == "sk-new" and "second" not in data["models"]


def test_form_errors_name_their_field_and_change_nothing(serve, sandbox):
    path = toml_config(sandbox)
    server = serve(args=("--config-file", str(path)))
    before = path.read_text()
    values = server.api("GET", "/api/web/config/form").json()["values"]

    def refused(change) -> list[dict]:
        bad = json.loads(json.dumps(values))
        change(bad)
        response = server.api("PUT", "/api/web/config/form", json={"values": bad})
        assert response.status_code == 422, response.text
        assert path.read_text() == before
        return response.json()["detail"]["errors"]

    assert refused(lambda v: v["loop_control"].update(max_steps_per_turn=0))[0]["field"] == (
        "loop_control.max_steps_per_turn"
    )
    assert refused(lambda v: v.update(default_model="nope"))[0]["field"] == "default_model"
    assert refused(lambda v: v["models"]["scripted"].update(provider="ghost"))[0]["field"] == (
        "models.scripted.provider"
    )
    assert refused(lambda v: v["models"]["scripted"].update(max_context_size="big"))[0]["field"] == (
        "models.scripted.max_context_size"
    )
    assert refused(lambda v: v.update(default_yolo="yes"))[0]["field"] == "default_yolo"
    # A secret placeholder where nothing is stored cannot be kept.
    errors = refused(lambda v: v["providers"]["scripted_provider"]["env"].update(NEW=SECRET))
    assert errors[0]["field"] == "providers.scripted_provider.env.NEW"


def test_the_raw_editor_keeps_secrets_it_never_showed(serve, sandbox):
    path = toml_config(sandbox)
    server = serve(args=("--config-file", str(path)))
    text = server.api("GET", "/api/web/config").json()["text"]
    changed = text.replace("max_steps_per_turn = 50", "max_steps_per_turn = 60")
    assert server.api("PUT", "/api/web/config", json={"text": changed}).status_code == 200
    saved = path.read_text()
    assert "sk-very-secret-1234" in saved and "header-secret" in saved and "max_steps_per_turn = 60" in saved
    assert "# my settings: keep this comment" in saved
    # JSON files too (the test sandbox's own config).
    json_server = serve()
    shown = json.loads(json_server.api("GET", "/api/web/config").json()["text"])
    env = shown["providers"]["scripted_provider"]["env"]
    assert env == {"KIMI_SCRIPTED_ECHO_SCRIPTS": SECRET}
    shown["default_thinking"] = True
    assert json_server.api("PUT", "/api/web/config", json={"text": json.dumps(shown)}).status_code == 200
    stored = json.loads(sandbox.config_path.read_text())
    assert stored["default_thinking"] is True
    assert stored["providers"]["scripted_provider"]["env"]["KIMI_SCRIPTED_ECHO_SCRIPTS"].endswith(
        "scripts.json"
    )
