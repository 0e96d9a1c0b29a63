"""`soulwire plugin install|list|remove|info`: plugins under `<share>/plugins/` (the reference's
`plugin.json` format, tools/plugins.py). A plugin is installed from a directory, a `.zip` file, a
`.zip` URL or a git URL; the copy is staged first, so a failed upgrade keeps the old version."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from soulwire import __version__
from soulwire.config.loader import ConfigError, load_raw_config, share_dir
from soulwire.tools.plugins import PLUGIN_JSON, PluginError, PluginSpec, installed_plugins, parse_plugin_json
from soulwire.usage import CommandParser

HOST_NAME = "soulwire"


_Parser = CommandParser  # one-line usage errors (exit 2) and examples in --help, as every command


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="soulwire plugin",
        description="Manage plugins (tools run as commands) under <share>/plugins.",
        epilog=(
            "examples:\n  soulwire plugin install ./my-plugin\n  soulwire plugin install plugin.zip\n"
            "  soulwire plugin install https://github.com/owner/repo/tree/main/plugins/x\n"
            "  soulwire plugin list"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    install = commands.add_parser("install", help="install a plugin and inject host configuration")
    install.add_argument("target", metavar="SOURCE", help="directory, .zip file, .zip URL or git URL")
    commands.add_parser("list", help="list installed plugins")
    commands.add_parser("remove", help="remove an installed plugin").add_argument("name")
    commands.add_parser("info", help="show plugin details").add_argument("name")
    return parser


def run_plugin(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    plugins_dir = share_dir() / "plugins"
    try:
        if args.command == "install":
            _install(args.target, plugins_dir)
        elif args.command == "list":
            _list(plugins_dir)
        elif args.command == "remove":
            shutil.rmtree(_installed_dir(args.name, plugins_dir))
            print(f"Removed plugin '{args.name}'")
        else:
            _info(args.name, plugins_dir)
    except PluginError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    return 0


def _installed_dir(name: str, plugins_dir: Path) -> Path:
    target = (plugins_dir / name).resolve()
    if not target.is_relative_to(plugins_dir.resolve()) or name.startswith("."):
        raise PluginError(f"Invalid plugin name: {name}")
    if not (target / PLUGIN_JSON).is_file():
        raise PluginError(f"Plugin '{name}' not found in {plugins_dir}")
    return target


def _list(plugins_dir: Path) -> None:
    found = installed_plugins(plugins_dir)
    if not found:
        print("No plugins installed.")
        return
    for _, spec in found:
        print(f"  {spec.name} v{spec.version} ({'installed' if spec.runtime else 'not configured'})")


def _info(name: str, plugins_dir: Path) -> None:
    spec = parse_plugin_json(_installed_dir(name, plugins_dir) / PLUGIN_JSON)
    print(f"Name:        {spec.name}")
    print(f"Version:     {spec.version}")
    print(f"Description: {spec.description or '(none)'}")
    print(f"Config file: {spec.config_file or '(none)'}")
    if spec.inject:
        print(f"Inject:      {', '.join(f'{k} <- {v}' for k, v in spec.inject.items())}")
    if spec.runtime:
        print(f"Runtime:     host={spec.runtime.host}, version={spec.runtime.host_version}")
    else:
        print("Runtime:     (not installed via host)")
    for tool in spec.tools:
        print(f"Tool:        {tool.name} — {tool.description}")


def _install(target: str, plugins_dir: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="soulwire-plugin-") as scratch:
        source = _resolve_source(target, Path(scratch))
        spec = parse_plugin_json(source / PLUGIN_JSON)
        host = _host_values()
        if spec.inject and not host.get("api_key"):
            sys.stderr.write(
                "Warning: No LLM provider configured. Plugins requiring API key injection will fail. "
                "Run 'soulwire login' or configure a provider first.\n"
            )
        destination = (plugins_dir / spec.name).resolve()
        plugins_dir.mkdir(parents=True, exist_ok=True)
        if not destination.is_relative_to(plugins_dir.resolve()) or spec.name.startswith("."):
            raise PluginError(f"Invalid plugin name: {spec.name}")
        staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=plugins_dir))
        try:
            staged = staging / spec.name
            shutil.copytree(source, staged, ignore=shutil.ignore_patterns(".git"))
            _inject(staged, spec, host)
            data = json.loads((staged / PLUGIN_JSON).read_text(encoding="utf-8"))
            data["runtime"] = {"host": HOST_NAME, "host_version": __version__}
            (staged / PLUGIN_JSON).write_text(
                json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8"
            )
            if destination.exists():
                shutil.rmtree(destination)
            staged.rename(destination)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    print(f"Installed plugin '{spec.name}' v{spec.version}")
    print(f"  runtime: host={HOST_NAME}, version={__version__}")


def _host_values() -> dict[str, str]:
    from soulwire.config.model import validate_config
    from soulwire.tools.plugins import host_values

    share = share_dir()
    try:
        raw, path = load_raw_config(config_file=None, config_text=None, share=share)
        return host_values(validate_config(raw, path or share / "config.toml"))
    except ConfigError as exc:
        sys.stderr.write(f"Warning: the config cannot be read ({exc}); nothing is injected.\n")
        return {}


def _inject(plugin_dir: Path, spec: PluginSpec, values: dict[str, str]) -> None:
    if not spec.inject or not spec.config_file:
        return
    config_path = (plugin_dir / spec.config_file).resolve()
    if not config_path.is_relative_to(plugin_dir.resolve()):
        raise PluginError(f"config_file escapes plugin directory: {spec.config_file}")
    try:
        config: Any = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PluginError(f"Failed to read config file {config_path}: {exc}") from None
    for dotted, source in spec.inject.items():
        if source not in values:
            raise PluginError(f"Host does not provide required inject key '{source}'")
        node = config
        *parents, last = dotted.split(".")
        for key in parents:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[last] = values[source]
    config_path.write_text(json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8")


# ------------------------------------------------------------------ sources


def _resolve_source(target: str, scratch: Path) -> Path:
    """A local directory holding plugin.json, from whatever the user named."""
    parts = urlsplit(target)
    if parts.scheme in ("http", "https") and parts.path.lower().endswith(".zip"):
        return _from_zip(_download(target, scratch / "download.zip"), scratch)
    if target.startswith(("https://", "http://", "git@")):
        return _from_git(target, scratch)
    path = Path(target).expanduser()
    if path.is_file() and path.suffix == ".zip":
        return _from_zip(path, scratch)
    if path.is_dir():
        if not (path / PLUGIN_JSON).is_file():
            raise PluginError(f"No plugin.json found in {path}")
        return path
    raise PluginError(f"{target} is not a directory, zip file, zip URL, or git URL")


def _download(url: str, destination: Path) -> Path:
    import httpx2

    print(f"Downloading {url}...")
    try:
        with httpx2.stream("GET", url, follow_redirects=True, timeout=60.0) as response:
            response.raise_for_status()
            with destination.open("wb") as handle:
                for chunk in response.iter_bytes():
                    handle.write(chunk)
    except httpx2.HTTPError as exc:
        raise PluginError(f"download failed: {exc}") from None
    return destination


def _from_zip(archive_path: Path, scratch: Path) -> Path:
    root = scratch / "unpacked"
    try:
        with zipfile.ZipFile(archive_path) as archive:
            for name in archive.namelist():
                member = PurePosixPath(name)
                if member.is_absolute() or ".." in member.parts or "\\" in name:
                    raise PluginError(f"zip contains unsafe path: {name}")
            archive.extractall(root)
    except zipfile.BadZipFile as exc:
        raise PluginError(f"invalid zip archive: {exc}") from None
    if (root / PLUGIN_JSON).is_file():
        return root
    inner = [d for d in root.iterdir() if d.is_dir() and (d / PLUGIN_JSON).is_file()]
    if len(inner) == 1:
        return inner[0]
    raise PluginError("No plugin.json found in zip")


def _from_git(url: str, scratch: Path) -> Path:
    clone_url, subpath, branch = _split_git_url(url)
    repo = scratch / "repo"
    command = [
        "git",
        "clone",
        "--depth",
        "1",
        *(["--branch", branch] if branch else []),
        clone_url,
        str(repo),
    ]
    print(f"Cloning {clone_url}...")
    try:
        done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise PluginError(f"git is needed to install from a git URL: {exc}") from None
    if done.returncode != 0:
        raise PluginError(f"git clone failed: {done.stderr.strip()}")
    source = (repo / subpath).resolve() if subpath else repo
    if not source.is_relative_to(repo.resolve()):
        raise PluginError(f"subpath escapes repository: {subpath}")
    if (source / PLUGIN_JSON).is_file():
        return source
    available = sorted(d.name for d in source.iterdir() if d.is_dir() and (d / PLUGIN_JSON).is_file())
    if available:
        names = "\n".join(f"  - {n}" for n in available)
        raise PluginError(
            f"No plugin.json at {subpath or 'the repository root'}. Available plugins:\n{names}\n"
            "Use: soulwire plugin install <url>/<plugin-name>"
        )
    raise PluginError("No plugin.json found in repository")


def _split_git_url(url: str) -> tuple[str, str | None, str | None]:
    """(clone URL, subpath, branch): `…/repo.git/sub`, or a GitHub/GitLab browser URL
    `https://host/owner/repo[/-]/tree/<branch>/sub`."""
    if ".git/" in url or url.endswith(".git"):
        clone, _, rest = url.partition(".git")
        return clone + ".git", rest.strip("/") or None, None
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        return url, None, None
    clone = f"{parts.scheme}://{parts.netloc}/{segments[0]}/{segments[1]}"
    rest = segments[2:]
    if rest[:1] == ["-"]:
        rest = rest[1:]
    branch = None
    if len(rest) >= 2 and rest[0] == "tree":
        branch, rest = rest[1], rest[2:]
    return clone, "/".join(rest) or None, branch
