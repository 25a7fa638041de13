"""A small Hub-compatible HTTP server on 127.0.0.1 for the tests (in memory, one per test).

It implements just what huggingface_hub 2.4 sends for create_repo, create_branch,
upload_folder (validate-yaml, preupload, the LFS batch API with basic PUT upload and verify,
the ndjson commit), model_info (revision resolution), list_repo_tree and file download
(HEAD and GET on resolve/{revision}/{path}). Requests to anything else get a 404 and are
recorded in `unhandled`, so a test can insist the client asked for nothing unexpected.

`fail` maps a route name ('create', 'branch', 'preupload', 'lfs_batch', 'commit', 'info',
'tree', 'resolve') to an HTTP status that route answers instead of working.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, unquote, urlsplit

MAX_BODY = 256 * 2**20
MAX_CHUNKS = 1 << 16
LFS_SUFFIXES = (".safetensors", ".bin")


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    files: dict[str, bytes]
    lfs: set[str]  # paths stored through LFS
    message: str


@dataclass
class Repo:
    private: bool
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        if revision in self.branches:
            return self.branches[revision]
        return revision if revision in self.commits else None


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None,
                 headers: dict | None = None, **extra):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}
        self.extra = extra  # more fields of the JSON error body


class FakeHub:
    """`with FakeHub(token) as hub:` serves on `hub.url` until the block ends."""

    def __init__(self, token: str):
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.fail: dict[str, int] = {}
        self.requests: list[tuple[str, str]] = []
        self.unhandled: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._n_commits = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.hub = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ---- state ------------------------------------------------------------------------------

    def _new_commit(self, repo: Repo, files: dict[str, bytes], lfs: set[str], message: str) -> str:
        self._n_commits += 1
        sha = hashlib.sha1(f"{self._n_commits}:{message}".encode()).hexdigest()
        repo.commits[sha] = Commit(files, lfs, message)
        return sha

    def repo(self, repo_id: str, authed: bool) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and not authed):
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def head(self, repo_id: str, revision: str, authed: bool) -> tuple[Repo, str]:
        repo = self.repo(repo_id, authed)
        sha = repo.resolve(revision)
        if sha is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return repo, sha

    def put_repo(self, repo_id: str, files: dict[str, bytes], branch: str = "main") -> str:
        """Commit `files` (all of them, nothing else) to `branch`, creating what is missing."""
        with self.lock:
            repo = self.repos.setdefault(repo_id, Repo(private=False))
            lfs = {p for p in files if p.endswith(LFS_SUFFIXES)}
            repo.branches[branch] = self._new_commit(repo, dict(files), lfs, "put_repo")
            return repo.branches[branch]

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """The files of a repository at a revision (for assertions)."""
        repo, sha = self.head(repo_id, revision, authed=True)
        return dict(repo.commits[sha].files)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeHub/1"

    @property
    def hub(self) -> FakeHub:
        return self.server.hub  # type: ignore[attr-defined]

    def log_message(self, format, *args) -> None:
        pass

    # ---- plumbing ---------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts, total = [], 0
            for _ in range(MAX_CHUNKS):
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers up to the blank line
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    raise HubError(413, "body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            raise HubError(400, "too many chunks")
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise HubError(413, "body too large")
        return self.rfile.read(n)

    def _json_body(self):
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            raise HubError(400, "malformed JSON body") from None

    def _authed(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {self.hub.token}"

    def _require_auth(self) -> None:
        if not self._authed():
            message = "Invalid credentials in Authorization header"
            raise HubError(401, message, headers={"X-Error-Message": message})

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None,
              content_type: str = "application/json", length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj, status: int = 200, headers: dict | None = None, content_type=None) -> None:
        self._send(status, json.dumps(obj).encode(), headers, content_type or "application/json")

    def _dispatch(self) -> None:
        hub = self.hub
        split = urlsplit(self.path)
        parts = [unquote(p) for p in split.path.split("/")[1:]]
        query = parse_qs(split.query)
        hub.requests.append((self.command, split.path))
        route = _route(self.command, parts)
        try:
            self.body = self._body()  # always consumed: the connection is kept alive
            if route is None:
                hub.unhandled.append((self.command, self.path))
                raise HubError(404, f"no such endpoint: {self.command} {split.path}")
            name, handler, args = route
            if name in hub.fail:
                raise HubError(hub.fail[name], f"injected failure of {name}")
            with hub.lock:
                handler(self, *args, query=query)
        except HubError as e:
            headers = dict(e.headers)
            if e.code:
                headers["X-Error-Code"] = e.code
            self._json({"error": e.message, **e.extra}, e.status, headers)

    do_GET = do_POST = do_PUT = do_HEAD = _dispatch

    # ---- endpoints ---------------------------------------------------------------------------

    def create_repo(self, query) -> None:
        self._require_auth()
        body = self._json_body()
        repo_id = f"{body.get('organization')}/{body.get('name')}"
        if not body.get("organization") or not body.get("name"):
            raise HubError(400, "name and organization are required")
        if repo_id in self.hub.repos:
            raise HubError(409, "You already created this model repo",
                           headers={"X-Error-Message": "You already created this model repo"},
                           url=f"{self.hub.url}/{repo_id}")
        repo = Repo(private=body.get("visibility") == "private")
        gitattributes = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
        repo.branches["main"] = self.hub._new_commit(repo, {".gitattributes": gitattributes},
                                                     set(), "initial commit")
        self.hub.repos[repo_id] = repo
        self._json({"url": f"{self.hub.url}/{repo_id}", "name": repo_id, "id": repo_id})

    def validate_yaml(self, query) -> None:
        self._json_body()
        self._json({"errors": [], "warnings": []})

    def create_branch(self, repo_id, branch, query) -> None:
        self._require_auth()
        body = self._json_body()
        repo, sha = self.hub.head(repo_id, body.get("startingPoint") or "main", True)
        if branch in repo.branches:
            raise HubError(409, f"Reference already exists: {branch}")
        repo.branches[branch] = sha
        self._json({})

    def info(self, repo_id, revision="main", query=None) -> None:
        repo, sha = self.hub.head(repo_id, revision, self._authed())
        files = repo.commits[sha].files
        self._json({
            "id": repo_id, "modelId": repo_id, "author": repo_id.split("/")[0], "sha": sha,
            "private": repo.private, "disabled": False, "gated": False, "downloads": 0,
            "likes": 0, "tags": [], "lastModified": "2024-01-01T00:00:00.000Z",
            "createdAt": "2024-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": p} for p in sorted(files)],
        })

    def tree(self, repo_id, revision, *path, query) -> None:
        repo, sha = self.hub.head(repo_id, revision, self._authed())
        commit = repo.commits[sha]
        prefix = "/".join(path)
        entries = []
        for p, data in sorted(commit.files.items()):
            if prefix and not p.startswith(prefix + "/"):
                continue
            entry = {"type": "file", "oid": git_blob_oid(data), "size": len(data), "path": p}
            if p in commit.lfs:
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            entries.append(entry)
        self._json(entries)

    def preupload(self, repo_id, revision, query) -> None:
        self._require_auth()
        body = self._json_body()
        repo, sha = self.hub.head(repo_id, revision, True)
        current = repo.commits[sha]
        files = []
        for f in body.get("files", []):
            path = f["path"]
            lfs = path.endswith(LFS_SUFFIXES) or f["size"] > 10 * 2**20
            old = current.files.get(path)
            oid = None
            if old is not None:
                oid = hashlib.sha256(old).hexdigest() if lfs else git_blob_oid(old)
            files.append({"path": path, "uploadMode": "lfs" if lfs else "regular",
                          "shouldIgnore": False, "oid": oid})
        self._json({"files": files, "commitOid": sha})

    def lfs_batch(self, repo_id, query) -> None:
        self._require_auth()
        body = self._json_body()
        self.hub.repo(repo_id, True)
        objects = []
        for obj in body.get("objects", []):
            oid, size = obj["oid"], obj["size"]
            entry = {"oid": oid, "size": size, "authenticated": True}
            if oid not in self.hub.lfs_objects:
                entry["actions"] = {
                    "upload": {"href": f"{self.hub.url}/_lfs/{oid}"},
                    "verify": {"href": f"{self.hub.url}/_lfs_verify/{oid}"},
                }
            objects.append(entry)
        self._json({"transfer": "basic", "objects": objects},
                   content_type="application/vnd.git-lfs+json")

    def lfs_put(self, oid, query) -> None:
        data = self.body
        if hashlib.sha256(data).hexdigest() != oid:
            raise HubError(400, "content does not match its oid")
        self.hub.lfs_objects[oid] = data
        self._send(200)

    def lfs_verify(self, oid, query) -> None:
        body = self._json_body()
        if body.get("oid") != oid or oid not in self.hub.lfs_objects:
            raise HubError(404, "object not uploaded")
        self._json({})

    def commit(self, repo_id, revision, query) -> None:
        self._require_auth()
        lines = [json.loads(ln) for ln in self.body.splitlines() if ln.strip()]
        repo, sha = self.hub.head(repo_id, revision, True)
        if revision not in repo.branches:
            raise HubError(400, f"{revision} is not a branch")
        parent = repo.commits[sha]
        files, lfs, summary = dict(parent.files), set(parent.lfs), ""
        for line in lines:
            key, value = line["key"], line["value"]
            if key == "header":
                summary = value["summary"]
            elif key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
                lfs.discard(value["path"])
            elif key == "lfsFile":
                if value["oid"] not in self.hub.lfs_objects:
                    raise HubError(400, f"LFS object {value['oid']} was never uploaded")
                files[value["path"]] = self.hub.lfs_objects[value["oid"]]
                lfs.add(value["path"])
            elif key == "deletedFile":
                files.pop(value["path"], None)
                lfs.discard(value["path"])
            elif key == "deletedFolder":
                for p in [p for p in files if p.startswith(value["path"].rstrip("/") + "/")]:
                    files.pop(p)
            else:
                raise HubError(400, f"unknown commit operation {key}")
        new = self.hub._new_commit(repo, files, lfs, summary)
        repo.branches[revision] = new
        self._json({"success": True, "commitOid": new, "pullRequestUrl": None,
                    "commitUrl": f"{self.hub.url}/{repo_id}/commit/{new}"})

    def resolve(self, repo_id, revision, *path, query) -> None:
        repo, sha = self.hub.head(repo_id, revision, self._authed())
        commit = repo.commits[sha]
        name = "/".join(path)
        if name not in commit.files:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": sha})
        data = commit.files[name]
        etag = hashlib.sha256(data).hexdigest() if name in commit.lfs else git_blob_oid(data)
        self._send(200, data, {"ETag": f'"{etag}"', "X-Repo-Commit": sha},
                   content_type="application/octet-stream")


def _route(method: str, p: list[str]):
    """(route name, handler, positional args) for a request, or None."""
    h = _Handler
    n = len(p)
    if p[:1] == ["api"]:
        if method == "POST" and p[1:] == ["repos", "create"]:
            return "create", h.create_repo, ()
        if method == "POST" and p[1:] == ["validate-yaml"]:
            return "validate", h.validate_yaml, ()
        if n >= 4 and p[1] == "models":
            repo_id, rest = f"{p[2]}/{p[3]}", p[4:]
            if method == "GET" and not rest:
                return "info", h.info, (repo_id,)
            if method == "GET" and len(rest) == 2 and rest[0] == "revision":
                return "info", h.info, (repo_id, rest[1])
            if method == "GET" and len(rest) >= 2 and rest[0] == "tree":
                return "tree", h.tree, (repo_id, *rest[1:])
            if method == "POST" and len(rest) == 2 and rest[0] == "preupload":
                return "preupload", h.preupload, (repo_id, rest[1])
            if method == "POST" and len(rest) == 2 and rest[0] == "commit":
                return "commit", h.commit, (repo_id, rest[1])
            if method == "POST" and len(rest) == 2 and rest[0] == "branch":
                return "branch", h.create_branch, (repo_id, rest[1])
        return None
    if method == "PUT" and n == 2 and p[0] == "_lfs":
        return "lfs_put", h.lfs_put, (p[1],)
    if method == "POST" and n == 2 and p[0] == "_lfs_verify":
        return "lfs_verify", h.lfs_verify, (p[1],)
    if (method == "POST" and n == 6 and p[1].endswith(".git")
            and p[2:] == ["info", "lfs", "objects", "batch"]):
        return "lfs_batch", h.lfs_batch, (f"{p[0]}/{p[1][:-4]}",)
    if method in ("GET", "HEAD") and n >= 5 and p[2] == "resolve":
        return "resolve", h.resolve, (f"{p[0]}/{p[1]}", p[3], *p[4:])
    return None
