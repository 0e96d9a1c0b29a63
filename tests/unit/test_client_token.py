"""The token a client of `serve` sends (`acp --connect`, `web`, `serve drain`): one rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from soulwire.config.loader import client_token
from soulwire.wire.environment import SERVER_TOKEN_ENV, SERVER_TOKEN_FILE, SHARE_DIR_ENV


@pytest.fixture
def share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in SHARE_DIR_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(SHARE_DIR_ENV[0], str(tmp_path))
    monkeypatch.delenv(SERVER_TOKEN_ENV, raising=False)
    return tmp_path


def test_a_token_file_beats_the_environment_which_beats_the_share_dir(share: Path, monkeypatch):
    assert client_token() is None
    (share / SERVER_TOKEN_FILE).write_text("from-the-share-dir\n")
    assert client_token() == "from-the-share-dir"
    monkeypatch.setenv(SERVER_TOKEN_ENV, " from-the-environment ")
    assert client_token() == "from-the-environment"
    given = share / "given"
    given.write_text("from-the-file\n")
    assert client_token(str(given)) == "from-the-file"
    with pytest.raises(OSError):
        client_token(str(share / "missing"))


def test_the_share_dir_given_is_read_instead_of_the_environments(share: Path, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    (other / SERVER_TOKEN_FILE).write_text("other\n")
    assert client_token(share=other) == "other"
