"""Static checks of the DSL rules (PROTOCOL.md, "What the kernel may do"),
before a kernel runs: a fast first filter that names the rule broken, so an
agent learns why at once. Anything written to dodge them (getattr on built
strings, exec) is not caught here: that is the run-time attribution's job
(issue 12); this only reads the source.

violations(source, dsl) -> [(rule, detail, line)]"""
import ast

RULES = {
    "triton": "no Triton",
    "compile": "no torch.compile, torch.jit or TorchDynamo",
    "extension": "no raw CUDA or inline extensions (cpp_extension, load_inline, CuPy, PyCUDA, Numba)",
    "ctypes": "no ctypes or cffi",
    "process": "no subprocess, os.system, os.popen, os.exec* or os.spawn*",
    "other_dsl": "no other DSL",
    "graphs": "no CUDA graphs",
    "reference": "no use of the reference or the input maker",
}

# module (or prefix) -> rule
MODULES = {
    "triton": "triton",
    "torch._dynamo": "compile", "torch.jit": "compile", "torch._inductor": "compile",
    "torch.utils.cpp_extension": "extension", "cupy": "extension", "pycuda": "extension",
    "numba": "extension",
    "ctypes": "ctypes", "cffi": "ctypes",
    "subprocess": "process", "multiprocessing": "process",
    "reference": "reference", "mkb_reference": "reference",
}
OTHER_DSL = {"cutedsl": ("tvm",), "tirx": ("cutlass",)}
# dotted names (attribute chains) -> rule
CALLS = {
    "torch.compile": "compile", "torch.jit.script": "compile", "torch.jit.trace": "compile",
    "torch.cuda.graph": "graphs", "torch.cuda.CUDAGraph": "graphs",
    "torch.cuda.make_graphed_callables": "graphs", "torch.cuda.graphs": "graphs",
    "load_inline": "extension",
    "os.system": "process", "os.popen": "process", "os.fork": "process", "os.forkpty": "process",
    "make_inputs": "reference",
}
OS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _module_rule(name, dsl):
    for other in OTHER_DSL.get(dsl, ()):
        if name == other or name.startswith(other + "."):
            return "other_dsl"
    for mod, rule in MODULES.items():
        if name == mod or name.startswith(mod + "."):
            return rule
    return None


def violations(source, dsl):
    tree = ast.parse(source)
    found = []
    aliases = {}  # local name -> dotted module/attribute it stands for

    def note(rule, detail, node):
        found.append((RULES[rule], detail, getattr(node, "lineno", 0)))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                rule = _module_rule(a.name, dsl)
                if rule:
                    note(rule, f"import {a.name}", node)
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            rule = _module_rule(node.module, dsl)
            if rule:
                note(rule, f"from {node.module} import ...", node)
            for a in node.names:
                full = f"{node.module}.{a.name}"
                rule = _module_rule(full, dsl) or CALLS.get(full)
                if rule and not _module_rule(node.module, dsl):
                    note(rule, f"from {node.module} import {a.name}", node)
                aliases[a.asname or a.name] = full
        elif isinstance(node, ast.Attribute):
            name = _dotted(node)
            if not name:
                continue
            head, _, rest = name.partition(".")
            full = aliases.get(head, head) + ("." + rest if rest else "")
            rule = CALLS.get(full) or (_module_rule(full, dsl) if "." in full else None)
            if not rule and full.startswith(OS_PREFIXES):
                rule = "process"
            if rule:
                note(rule, full, node)
        elif isinstance(node, ast.Call):
            fn = _dotted(node.func)
            # __import__("x") / importlib.import_module("x") with a constant name
            if fn in ("__import__", "importlib.import_module") and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                rule = _module_rule(node.args[0].value, dsl)
                if rule:
                    note(rule, f"{fn}({node.args[0].value!r})", node)
            elif fn in CALLS and "." not in fn:
                note(CALLS[fn], f"{fn}()", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.endswith(("reference.py", "problem.json")):
            note("reference", f"the path {node.value!r}", node)
    # one line per rule and line, in source order
    seen, out = set(), []
    for rule, detail, line in sorted(found, key=lambda r: r[2]):
        if (rule, line) not in seen:
            seen.add((rule, line))
            out.append((rule, detail, line))
    return out
