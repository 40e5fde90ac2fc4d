"""The package's namespace and its PEP 561 types: `__all__` is the whole
public namespace; `_pagepilot.pyi` names everything the extension module
defines at run time, with the runtime's parameters, descriptors, bases and
exception attributes (so a name added to the crate without a stub fails
here); mypy's stubtest agrees; `mypy --strict` passes the package and the
typed example, and rejects misuse the stubs describe.

The stubs are read from the source tree (`python/pagepilot`) and compared
with the installed module; the installed files must be the tree's.
"""

import ast
import errno
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import types

import pytest

import pagepilot
from pagepilot import _pagepilot

from conftest import ROOT

PACKAGE = ROOT / "python" / "pagepilot"
STUB = PACKAGE / "_pagepilot.pyi"
PYPROJECT = ROOT / "python" / "pyproject.toml"
EXAMPLE = ROOT / "examples" / "python" / "typed_example.py"

# What every module has, stubbed or not.
MODULE_IMPLICIT = {"__doc__", "__file__", "__loader__", "__name__", "__package__", "__spec__"}
# What every class has, with the types `object`'s stubs already give.
CLASS_IMPLICIT = {
    "__doc__", "__module__", "__weakref__", "__dict__", "__repr__", "__str__", "__hash__",
}
# PEP 688's methods: Python 3.12 makes them attributes of a class with the
# buffer slots; 3.11 has the slots only (the stubs declare them for mypy).
BUFFER_METHODS = {"__buffer__", "__release_buffer__"}
STUB_ONLY = BUFFER_METHODS if sys.version_info < (3, 12) else set()


def _stub_module():
    return ast.parse(STUB.read_text(), filename=str(STUB))


def _names(body):
    """Names a stub body defines: {name: [nodes]} (overloads: several)."""
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.setdefault(node.target.id, []).append(node)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node)
    return out


def _decorators(fn):
    return {ast.unparse(d) for d in fn.decorator_list}


def _stub_params(fns):
    """(name, kind, has a default) of a stub function; overloads merged (a
    parameter has a default if any overload gives one)."""
    merged = None
    for fn in fns:
        a = fn.args
        positional = a.posonlyargs + a.args
        first_default = len(positional) - len(a.defaults)
        params = [(p.arg, "positional", i >= first_default) for i, p in enumerate(positional)]
        if a.vararg:
            params.append((a.vararg.arg, "*", False))
        params += [(p.arg, "keyword", d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        if a.kwarg:
            params.append((a.kwarg.arg, "**", False))
        if merged is None:
            merged = params
        else:
            assert [p[:2] for p in params] == [p[:2] for p in merged], (
                f"overloads of {fn.name} name different parameters"
            )
            merged = [(n, k, d or m) for (n, k, d), (_, _, m) in zip(params, merged)]
    return merged


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.VAR_POSITIONAL: "*",
    inspect.Parameter.KEYWORD_ONLY: "keyword",
    inspect.Parameter.VAR_KEYWORD: "**",
}


def _runtime_params(obj):
    sig = inspect.signature(obj)
    return [(p.name, _KINDS[p.kind], p.default is not p.empty) for p in sig.parameters.values()]


def _is_overload_helper(node):
    return isinstance(node, ast.FunctionDef) and "overload" in _decorators(node)


def test_the_namespace_holds_exactly_the_public_api():
    public = {n for n in dir(pagepilot) if not n.startswith("_")}
    assert public == set(pagepilot.__all__), (
        f"public names not in __all__: {sorted(public - set(pagepilot.__all__))}; "
        f"in __all__ but missing: {sorted(set(pagepilot.__all__) - public)}"
    )
    assert len(pagepilot.__all__) == len(set(pagepilot.__all__))
    for name in pagepilot.__all__:
        assert getattr(pagepilot, name) is not None
    # No helper import leaks, whatever its name.
    leaks = ("annotations", "Any", "Iterable", "Sequence", "os", "overload", "Literal", "pandas")
    for leaked in leaks:
        assert not hasattr(pagepilot, leaked), leaked
    star = {}
    exec("from pagepilot import *", star)
    assert set(star) - {"__builtins__"} == set(pagepilot.__all__)


def test_the_installed_package_is_the_source_trees_with_its_pep561_files():
    installed = pathlib.Path(pagepilot.__file__).parent
    for name in ("__init__.py", "_pagepilot.pyi", "py.typed"):
        assert (installed / name).is_file(), f"{name} is not installed in {installed}"
        assert (installed / name).read_bytes() == (PACKAGE / name).read_bytes(), (
            f"the installed {name} differs from python/pagepilot/{name}: reinstall the package"
        )


def test_the_stubs_name_every_runtime_name_of_the_extension_module():
    stub = _names(_stub_module().body)
    runtime = set(dir(_pagepilot)) - MODULE_IMPLICIT
    missing = runtime - set(stub)
    assert not missing, f"pagepilot._pagepilot's names without a stub: {sorted(missing)}"
    # A stub's class or function must exist; only private type aliases and
    # type variables are stub-only.
    stale = set()
    for name, nodes in stub.items():
        if name in runtime:
            continue
        if not name.startswith("_") or any(
            isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in nodes
        ):
            stale.add(name)
    assert not stale, f"stubbed but absent at run time: {sorted(stale)}"
    assert ast.literal_eval(stub["__all__"][0].value) == list(_pagepilot.__all__)


def test_the_stubs_match_the_runtime_kind_and_parameters_of_every_name():
    stub = _names(_stub_module().body)
    runtime = set(dir(_pagepilot)) - MODULE_IMPLICIT - {"__all__"}
    for name in sorted(runtime):
        obj = getattr(_pagepilot, name)
        nodes = stub.get(name)
        assert nodes, f"{name} has no stub"
        if isinstance(obj, type):
            [cls] = nodes
            assert isinstance(cls, ast.ClassDef), f"{name} is a class at run time"
            bases = [b.__name__ for b in obj.__bases__ if b is not object]
            assert [ast.unparse(b) for b in cls.bases] == bases, f"bases of {name}"
        elif isinstance(obj, types.BuiltinFunctionType):
            assert all(isinstance(n, ast.FunctionDef) for n in nodes), f"{name} is a function"
            fns = [n for n in nodes if _is_overload_helper(n)] or nodes
            assert _stub_params(fns) == _runtime_params(obj), f"parameters of {name}"
        else:
            [node] = nodes
            assert isinstance(node, ast.AnnAssign), f"{name} is a value at run time"
            assert type(obj).__name__ in ast.unparse(node.annotation), (
                f"{name} is a {type(obj).__name__}: annotated {ast.unparse(node.annotation)}"
            )


def test_the_stubs_name_every_method_and_property_of_every_class():
    stub = _names(_stub_module().body)
    classes = [n for n in dir(_pagepilot) if isinstance(getattr(_pagepilot, n), type)]
    assert {"Region", "Pool", "Client", "Policy", "MapError"} <= set(classes)
    for cname in classes:
        cls = getattr(_pagepilot, cname)
        assert cname in stub, f"class {cname} has no stub"
        members = _names(stub[cname][0].body)
        runtime = set(vars(cls)) - CLASS_IMPLICIT
        missing = runtime - set(members)
        assert not missing, f"{cname}: no stub for {sorted(missing)}"
        # Stub-only: instance attributes (exceptions' errno, ...; checked by
        # test_exceptions_carry_the_attributes_the_stubs_declare) and PEP 688.
        for name, nodes in members.items():
            if name in runtime:
                continue
            if issubclass(cls, BaseException):
                assert all(isinstance(n, ast.AnnAssign) and n.value is None for n in nodes), (
                    f"{cname}.{name} is stubbed but absent at run time"
                )
            else:
                assert name in STUB_ONLY, f"{cname}.{name} is stubbed but absent at run time"
        for name in sorted(runtime):
            value = vars(cls)[name]
            fns = [n for n in members[name] if isinstance(n, ast.FunctionDef)]
            assert fns, f"{cname}.{name} must be a def (method, property or staticmethod)"
            decorators = set().union(*(_decorators(f) for f in fns))
            descriptors = (types.GetSetDescriptorType, types.MemberDescriptorType, property)
            if isinstance(value, descriptors):
                assert "property" in decorators, f"{cname}.{name} is a property at run time"
                continue
            assert "property" not in decorators, f"{cname}.{name} is not a property at run time"
            is_static = isinstance(value, staticmethod)
            assert ("staticmethod" in decorators) == is_static, f"{cname}.{name}: staticmethod"
            params = _stub_params([f for f in fns if _is_overload_helper(f)] or fns)
            if name == "__new__":
                # The constructor's text signature is the class's own.
                assert params[1:] == _runtime_params(cls), f"parameters of {cname}()"
            else:
                assert params == _runtime_params(getattr(cls, name)), (
                    f"parameters of {cname}.{name}"
                )


def _declared_attributes(stub, cname):
    """Instance attributes a stub exception class (and its stub bases) declare."""
    cls = stub[cname][0]
    attrs = {
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and n.value is None and isinstance(n.target, ast.Name)
    }
    for base in cls.bases:
        if ast.unparse(base) in stub:
            attrs |= _declared_attributes(stub, ast.unparse(base))
    return attrs


# Makes a write-back fail: a writable region's page past RLIMIT_FSIZE
# (EFBIG), in a child process so that the limit is its own.
_FLUSH_ERROR = """
import json, resource, signal, sys
import pagepilot
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
with pagepilot.map_file(sys.argv[1], "256K", writable=True) as r:
    m = memoryview(r)
    m[512 * 1024] = 1
    m.release()
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))
    try:
        r.flush()
    except pagepilot.FlushError as e:
        print(json.dumps({"type": type(e).__name__, "attrs": {k: v for k, v in vars(e).items()}}))
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
"""


def test_exceptions_carry_the_attributes_the_stubs_declare(tmp_path, zero_file):
    stub = _names(_stub_module().body)
    raised = {}

    def provoke(cls, f):
        with pytest.raises(cls) as e:
            f()
        assert type(e.value) is cls
        raised.setdefault(cls.__name__, []).append(vars(e.value))

    provoke(pagepilot.MapError, lambda: pagepilot.map_file(tmp_path / "missing", "1MB"))
    with pagepilot.map_file(zero_file, "64K") as r:
        # Refused before the pager is asked: EINVAL, as MapError promises.
        provoke(pagepilot.MapError, lambda: r.set_budget(100))
    provoke(pagepilot.ClosedError, r.flush)
    broken = "queue q;\nevent PageFault() {\n  victim = ;\n}\n"  # a syntax error
    rejected = "queue q;\nevent Other() {\n}\n"  # the checker's
    provoke(pagepilot.PolicyError, lambda: pagepilot.Policy.compile(broken))
    provoke(pagepilot.PolicyError, lambda: pagepilot.Policy.compile(rejected))
    provoke(pagepilot.PoolError, lambda: pagepilot.Pool(1))
    provoke(pagepilot.DaemonError, lambda: pagepilot.connect(tmp_path / "no-daemon.sock"))
    provoke(pagepilot.TraceError, lambda: pagepilot.simulate(tmp_path / "missing.trace"))
    provoke(pagepilot.SimulationError, lambda: pagepilot.simulate([1, 2], ["no-such-policy"], [1]))
    store = pagepilot.PersistentManager(tmp_path / "dataspaces")
    provoke(pagepilot.DataspaceError, lambda: store.dataspace("missing"))
    with pagepilot.map_anon("64K", "16K") as r:
        provoke(pagepilot.PinError, lambda: r.pin(0, "1MB"))

    data = tmp_path / "flush.bin"
    data.write_bytes(bytes(1 << 20))
    out = subprocess.run(
        [sys.executable, "-c", _FLUSH_ERROR, str(data)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    flush = json.loads(out.stdout)
    assert flush["type"] == "FlushError"
    raised["FlushError"] = [flush["attrs"]]

    assert raised["MapError"][0]["errno"] == errno.ENOENT
    assert raised["MapError"][1]["errno"] == errno.EINVAL
    assert raised["DaemonError"][0]["errno"] == errno.ENOENT
    assert raised["DataspaceError"][0] == {"errno": errno.ENOENT, "manager": "persistent"}
    assert raised["PinError"][0] == {"errno": errno.EINVAL}
    assert raised["PolicyError"][0] == {"line": 3, "column": 12}
    assert raised["PolicyError"][1] == {"line": None, "column": None}
    assert flush["attrs"] == {"pages": [[128, errno.EFBIG]], "errno": errno.EFBIG}

    for cname, instances in raised.items():
        assert cname in stub, f"class {cname} has no stub"
        declared = _declared_attributes(stub, cname)
        for attrs in instances:
            assert set(attrs) == declared, (
                f"{cname} carries {sorted(attrs)}; its stub declares {sorted(declared)}"
            )
    # Every exception class is provoked above: a new one needs a case here,
    # so that its stub's attributes are checked too. (PagepilotError itself
    # is raised only by a region unpickled in another process; test_fork.)
    exceptions = {
        n for n in dir(_pagepilot) if isinstance(getattr(_pagepilot, n), type)
        and issubclass(getattr(_pagepilot, n), BaseException)
    }
    assert exceptions - {"PagepilotError"} == set(raised)


def _mypy(*args, cwd):
    """Runs mypy (installed by scripts/setup) on the installed package."""
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("mypy-cache"))


def test_stubtest_finds_the_stubs_consistent_with_the_runtime(tmp_path):
    allowlist = tmp_path / "allowlist.txt"
    allowlist.write_text("".join(f"pagepilot._pagepilot.Region.{m}\n" for m in sorted(STUB_ONLY)))
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "pagepilot",
         "--mypy-config-file", str(PYPROJECT), "--allowlist", str(allowlist)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_package_passes_mypy_strict(tmp_path, mypy_cache):
    out = _mypy("--config-file", str(PYPROJECT), "--strict", "--cache-dir", mypy_cache,
                "-p", "pagepilot", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found in 2 source files" in out.stdout


def test_the_typed_example_passes_mypy_strict(tmp_path, mypy_cache):
    out = _mypy("--strict", "--cache-dir", mypy_cache, str(EXAMPLE), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found in 1 source file" in out.stdout


def test_the_typed_example_runs():
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"sum through a region: {sum(range(1 << 17))}"
    assert "         lru  32 frames: 640 faults" in lines
    assert lines[-1] == "ok"


_MISUSE = '''
import numpy as np

import pagepilot

region = pagepilot.map_anon("1MB", "64K")
reveal_type(region.array(np.float32))
reveal_type(pagepilot.simulate([1, 2, 3]))
reveal_type(region.path)
region.flush(True)
pagepilot.map_file("data.bin", budget=1.5)
pagepilot.curve([1, 2, 3], "clock")
events: str = pagepilot.Policy.compile("").events
region.no_such_method()
try:
    pass
except pagepilot.PolicyError as e:
    column: str = e.column
'''


def test_mypy_rejects_misuse_the_stubs_describe(tmp_path, mypy_cache):
    snippet = tmp_path / "misuse.py"
    snippet.write_text(_MISUSE)
    out = _mypy("--strict", "--cache-dir", mypy_cache, str(snippet), cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    found = {}
    for line in out.stdout.splitlines():
        m = re.match(r".*misuse\.py:(\d+): (error|note): (.*)", line)
        if m and not m.group(3).startswith(("Possible overload", "    def ")):
            found.setdefault(int(m.group(1)), []).append(m.group(3))
    lines = _MISUSE.splitlines()

    def at(text):
        return lines.index(text) + 1

    assert re.search(r"ndarray\[.*dtype\[numpy\.(float32|floating\[.*32Bit\])\]\]",
                     found[at("reveal_type(region.array(np.float32))")][0])
    assert found[at("reveal_type(pagepilot.simulate([1, 2, 3]))")] == [
        'Revealed type is "pagepilot.Records"'
    ]
    assert found[at("reveal_type(region.path)")] == ['Revealed type is "pathlib.Path | None"']
    errors = {n for n, msgs in found.items() if any(not m.startswith("Revealed") for m in msgs)}
    assert errors == {
        at("region.flush(True)"),
        at('pagepilot.map_file("data.bin", budget=1.5)'),
        at('pagepilot.curve([1, 2, 3], "clock")'),
        at('events: str = pagepilot.Policy.compile("").events'),
        at("region.no_such_method()"),
        at("    column: str = e.column"),
    }, out.stdout
