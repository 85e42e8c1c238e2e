#!/usr/bin/env python3
"""Write the fuzz seed corpus (fuzz/corpus/<target>/) from the repository's
fixtures plus small hand-made .npy / .safetensors files.

Only the folders of the targets in GENERATED are emptied and rewritten; any
other corpus folder (fuzz/corpus/rocprof/ and fuzz/corpus/tune_space/, whose
seeds were made by hand: no fixture holds a tune space, and the AMD seeds
are cut by hand) is left as it is.

Seeds are cut small (a few KB to ~60 KB): the fuzzers mutate faster, and
libFuzzer's default -max_len follows the largest seed. Standard library only.
Run from anywhere: python3 scripts/fuzz/make_corpus.py
"""

import gzip
import json
import os
import re
import shutil
import struct

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "fixtures")
OUT = os.path.join(ROOT, "fuzz", "corpus")
SEP = b"\n@@@@\n"  # kopt_fuzz::FILE_SEPARATOR

# The targets whose corpus this script writes, and so may delete first.
GENERATED = (
    "ncu_csv",
    "kineto",
    "kineto_serde",
    "kopt_trace",
    "npy",
    "safetensors",
    "run_folder",
    "rocprofv3_json",
    "rocpd",
    "gzip",
    "demangle",
)


def fixture(rel):
    """A fixture's bytes; a `.gz` one decompressed (the seeds are cut from
    the plain text; the gzip target gets its compressed seeds apart)."""
    with open(os.path.join(FIX, rel), "rb") as f:
        data = f.read()
    return gzip.decompress(data) if rel.endswith(".gz") else data


def gz(data):
    """Deterministic gzip (no file name, mtime 0): the seeds stay the same
    from one run of this script to the next."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def write(target, name, data):
    if target not in GENERATED:
        raise SystemExit(
            f"make_corpus.py: {target}: not in GENERATED, so its old seeds "
            "would never be cleared; add it there"
        )
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- ncu CSV


def csv_head(rel, rows):
    """Banner lines (==PROF==...), the header, the units row (a raw page
    has one: its first field is empty) and the first `rows` data rows."""
    lines = fixture(rel).split(b"\n")
    out, data = [], 0
    for line in lines:
        out.append(line)
        if line.startswith(b'"ID"') or line.startswith(b"==") or line.startswith(b'"",') or not line:
            continue
        data += 1
        if data >= rows:
            break
    return b"\n".join(out) + b"\n"


def csv_ids(rel, ids, per_id=None):
    """A details page (one row per metric): banner, header and the rows of
    launches `ids`; with `per_id`, at most that many metric rows per launch
    besides the rows that carry a rule."""
    import csv
    import io

    keep, count = [], {}
    for line in fixture(rel).split(b"\n"):
        m = re.match(rb'^"(\d+)",', line)
        if m is None:
            keep.append(line)
            continue
        i = int(m.group(1))
        if i not in ids:
            continue
        row = next(csv.reader(io.StringIO(line.decode())))
        has_rule = len(row) > 15 and row[15] != ""
        count[i] = count.get(i, 0) + 1
        if per_id is None or has_rule or count[i] <= per_id:
            keep.append(line)
    while keep and not keep[-1]:
        keep.pop()
    return b"\n".join(keep) + b"\n"


def ncu_seeds():
    write("ncu_csv", "raw_h100_base.csv", csv_head("labeled-suite-h100/ncu_raw_base.csv", 4))
    write("ncu_csv", "raw_h100_auto.csv", csv_head("labeled-suite-h100/ncu_raw_auto.csv.gz", 2))
    write("ncu_csv", "raw_h100_probe.csv", csv_head("h100-probe/ncu_raw.csv", 3))
    write("ncu_csv", "raw_h200_timing.csv", csv_head("moe-route-h200-profile/pass1-timing.csv", 4))
    write("ncu_csv", "raw_h200_targeted.csv", csv_head("moe-route-h200-profile/pass2-targeted.csv", 3))
    write("ncu_csv", "details_h100.csv", csv_ids("labeled-suite-h100/ncu_details.csv", {0, 1}))
    write("ncu_csv", "details_h200_deep.csv", csv_ids("moe-route-h200-profile/pass3-deep.csv", {0}))
    # The stall suite: the basic set's raw page and the full set's details
    # (the full raw page is over 100 KB a row: the details carry its metrics).
    write("ncu_csv", "raw_h100_stall_basic.csv", csv_head("stall-suite-h100/basic_raw.csv", 3))
    write("ncu_csv", "details_h100_stall.csv", csv_ids("stall-suite-h100/full_details.csv", {0}))
    # Targeted passes of `kopt profile` runs (advice zoo, a model, profile_module).
    write("ncu_csv", "targeted_h100_stall.csv", csv_head("stall-suite-h100/profile/pass2-targeted.csv", 3))
    write("ncu_csv", "targeted_h100_bert.csv", csv_head("advice-h100/bert_b32_s128_fp32-plain/pass2-targeted.csv", 3))
    write("ncu_csv", "targeted_h100_resnet50.csv", csv_head("models/resnet50-b256-h100/pass2-targeted.csv", 3))
    write("ncu_csv", "targeted_h200_module.csv", csv_head("profile-module-h200/run/pass2-targeted.csv", 3))
    # A raw page and the details page of the same run: merge_profile attaches the rules.
    write(
        "ncu_csv",
        "raw_and_details_probe.csv",
        csv_head("h100-probe/ncu_raw.csv", 1) + SEP + csv_ids("h100-probe/ncu_details.csv", {0}, per_id=20),
    )
    write(
        "ncu_csv",
        "tiny_raw.csv",
        b'"ID","Kernel Name","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__bytes.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'
        b'"","","","","","","nsecond","byte","%"\n'
        b'"0","kern(float*, int)","(256, 1, 1)","(1024, 1, 1)","0","9.0","1,234","1.5e6","45.2"\n'
        b'"1","void k2<\\"q\\">()","(32, 1, 1)","(1, 1, 1)","0","9.0","800","n/a","0"\n',
    )


# ---------------------------------------------------------------- Kineto


def json_spans(text, start):
    """(begin, end) of each value of the JSON array whose '[' is at `start`."""
    spans, i, depth, begin, in_str = [], start + 1, 0, None, False
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            if depth == 0:
                begin = i
            depth += 1
        elif c in "}]":
            if depth == 0:
                return spans, i  # the array's own ']'
            depth -= 1
            if depth == 0:
                spans.append((begin, i + 1))
        i += 1
    raise ValueError("unterminated array")


def kineto_cut(rel, kernels):
    """The trace (a `.gz` fixture decompressed) with its first `kernels` kernels and memory ops, the runtime
    calls and flow arrows of the same correlations, a few CPU ops, every
    metadata, annotation and instant event; formatting kept as written."""
    text = fixture(rel).decode()
    open_at = text.index("[", text.index('"traceEvents"'))
    spans, close = json_spans(text, open_at)
    events = [json.loads(text[a:b]) for a, b in spans]
    keep, corr, cpu = set(), set(), 0
    for i, e in enumerate(events):
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and len(corr) < kernels:
            keep.add(i)
            corr.add(e.get("args", {}).get("correlation"))
    for i, e in enumerate(events):
        cat = e.get("cat")
        c = e.get("args", {}).get("correlation")
        if cat in ("cuda_runtime", "cuda_driver", "cuda_api") and c in corr:
            keep.add(i)
        elif e.get("ph") in ("s", "f") and e.get("id") in corr:
            keep.add(i)
        elif cat in (None, "user_annotation", "gpu_user_annotation", "Trace", "overhead"):
            keep.add(i)
        elif cat == "cpu_op" and cpu < 8:
            cpu += 1
            keep.add(i)
    sep = text[spans[0][1] : spans[1][0]] if len(spans) > 1 else ", "
    body = sep.join(text[a:b] for i, (a, b) in enumerate(spans) if i in keep)
    lead = text[open_at + 1 : spans[0][0]]
    return (text[: open_at + 1] + lead + body + text[spans[-1][1] :]).encode()


def kineto_seeds():
    seeds = {
        "torch_h100_probe.json": kineto_cut("h100-probe/torch_trace.json", 14),
        "torch_h200_matmul.json": fixture("seed000-h200/matmul_trace.json"),
        "torch_h200_moe.json": kineto_cut("seed000-h200/moe_trace.json", 24),
        "kopt_export_moe.json": kineto_cut("kopt-trace-h200/moe_perfetto.json", 20),
        # ProfilerStep# annotations on the CPU and the GPU (synthetic, generate.py).
        "profiler_steps.json": fixture("synthetic-timelines/kineto_profiler_steps.json"),
        # torch.profiler on an H100 as the prediction checks captured it (gzip'ed there).
        "torch_h100_matmuls.json": kineto_cut("predictions-h100-profiler/matmuls.pt.trace.json.gz", 12),
        "torch_h100_moe.json": kineto_cut("predictions-h100-bare/moe.pt.trace.json.gz", 16),
        # What PyTorch writes that is not JSON: the repair path.
        "broken_backslash_quote.json": b'{"traceEvents": [{"ph": "X", "cat": "Kernel", "name": "C:\\qemp\\kern "quoted" x", "ts": 1.5, "dur": 2, "args": {"correlation": 7}}]}',
        "minimal.json": b'{"traceEvents": [\n{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 4784577684397.93, "dur": 5.856, "args": {"correlation": 1, "stream": 7, "device": 0, "grid": [4, 1, 1], "block": [128, 1, 1]}},\n'
        b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 4784577684390.5, "dur": 3, "args": {"correlation": 1}},\n'
        b'{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": "4784577684400", "dur": 1, "args": {"correlation": 2, "bytes": 4096}},\n'
        b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 4784577684380, "dur": 40}\n'
        b'], "deviceProperties": [{"name": "NVIDIA H200", "numSms": 132}]}',
    }
    for name, data in seeds.items():
        json.loads(data.decode()) if not name.startswith("broken") else None
        write("kineto", name, data)
        write("kineto_serde", name, data)


# ---------------------------------------------------------------- kopt traces


def jsonl_head(rel, lines):
    """The first `lines` lines of a kopt trace (a `.gz` fixture decompressed)
    and its closing `end` record."""
    all_lines = fixture(rel).split(b"\n")
    head = all_lines[:lines]
    tail = [l for l in all_lines[lines:] if l.startswith(b'{"t":"end"')]
    return b"\n".join(head + tail) + b"\n"


def kopt_trace_seeds():
    write("kopt_trace", "moe_trace.jsonl", jsonl_head("kopt-trace-h200/moe_trace.jsonl", 120))
    write("kopt_trace", "nvtx_vk_trace.jsonl", fixture("kopt-trace-h200/nvtx_vk_trace.jsonl"))
    write("kopt_trace", "sampled_moe_trace.jsonl", jsonl_head("kopt-trace-h200/moe_sampled_trace.jsonl", 80))
    # Memcpy-to-symbol, 256 MiB memsets and the stall kernels of the stall suite.
    write("kopt_trace", "stall_suite_trace.jsonl", fixture("stall-suite-h100/profile/trace.jsonl"))
    write("kopt_trace", "cudnn_benchmark.jsonl", fixture("synthetic-timelines/kopt_cudnn_benchmark.jsonl"))
    write("kopt_trace", "profile_module_h200.jsonl", jsonl_head("profile-module-h200/run/trace.jsonl", 100))
    write("kopt_trace", "advice_resnet50_h100.jsonl", jsonl_head("advice-h100/resnet50_b1_fp32-plain/trace.jsonl.gz", 100))
    write("kopt_trace", "bare_matmuls_h200.jsonl", jsonl_head("predictions-h200-bare/matmuls.trace.jsonl.gz", 100))
    hand = {
        "sample.jsonl": """{"t":"api","name":"cudaLaunchKernel_v7000","s":1000,"e":6000,"tid":42,"c":7}
{"t":"kernel","name":"_Z14kopt_tiny_stepPi","s":9000,"e":11500,"dev":0,"str":7,"c":7,"g":[1,1,1],"b":[32,1,1],"reg":16,"smem":0,"graph":0}
{"t":"memset","name":"Memset","s":12000,"e":12600,"dev":0,"str":7,"c":8,"bytes":4}
{"t":"end","records":3,"dropped":0}
""",
        "sampled_windows.jsonl": """{"t":"process","pid":10}
{"t":"range_start","id":3,"s":90,"tid":1,"name":"step","dom":""}
{"t":"api","name":"cuLaunchKernel","s":100,"e":105,"tid":1,"c":1}
{"t":"kernel","name":"first","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"kernel","name":"cut","s":0,"e":0,"dev":0,"str":7,"c":2}
{"t":"window","s":50,"e":200}
{"t":"api","name":"cuLaunchKernel","s":5000,"e":5005,"tid":1,"c":1}
{"t":"kernel","name":"second","s":5010,"e":5030,"dev":0,"str":7,"c":1}
{"t":"kernel","name":"early","s":4899,"e":4950,"dev":0,"str":7,"c":2}
{"t":"range_end","id":3,"s":5040}
{"t":"window","s":4900,"e":5100}
{"t":"end","records":6,"dropped":0}
""",
        "devices_ranges.jsonl": """{"t":"device","id":0,"name":"NVIDIA H200","sms":132,"cc":[9,0],"mem_bw_kbs":4800000000,"clock_khz":1980000}
{"t":"device","id":1,"name":"NVIDIA H100 80GB HBM3","sms":132,"cc":[9,0],"mem_bw_kbs":3350000000,"clock_khz":1980000}
{"t":"range_start","id":2,"s":100,"tid":1,"name":"step#1","dom":""}
{"t":"range_start","id":3,"s":150,"tid":1,"name":"inner","dom":"d"}
{"t":"api","name":"cudaGraphLaunch","s":151,"e":160,"tid":1,"c":9}
{"t":"kernel","name":"_ZN2at6native18elementwise_kernelILi128ELi2EEEviT1_","s":165,"e":175,"dev":1,"str":7,"c":9,"g":[2,1,1],"b":[128,1,1],"graph":1}
{"t":"memcpy","name":"Memcpy kind 2","s":176,"e":179,"dev":1,"str":7,"c":10,"bytes":64}
{"t":"api","name":"cudaStreamSynchronize_v3020","s":161,"e":181,"tid":1,"c":11}
{"t":"range_end","id":3,"s":180}
{"t":"range_end","id":2,"s":200}
{"t":"range_start","id":4,"s":300,"tid":1,"name":"never closed","dom":""}
{"t":"end","records":5,"dropped":2,"lost_buffers":1}
""",
    }
    for name, text in hand.items():
        write("kopt_trace", name, text.encode())


# ---------------------------------------------------------------- tensors


def npy(descr, shape, data, version=1, fortran=False):
    shape_text = "(%s,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(map(str, shape))
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr,
        "True" if fortran else "False",
        shape_text,
    )
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(header) + 1) % 64) % 64
    header = (header + " " * pad + "\n").encode()
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + data


def tensor_seeds():
    f32 = struct.pack("<6f", 1.0, -2.5, 0.0, 3.25, float("nan"), float("inf"))
    write("npy", "f32_2x3.npy", npy("<f4", [2, 3], f32))
    write("npy", "f64_4.npy", npy("<f8", [4], struct.pack("<4d", 1e-300, -0.0, 1e300, 7.0)))
    write("npy", "f16_3.npy", npy("<f2", [3], struct.pack("<3H", 0x3C00, 0x7C00, 0x0001)))
    write("npy", "i64_2x2_v2.npy", npy("<i8", [2, 2], struct.pack("<4q", 1, -1, 2**62, -(2**63)), version=2))
    write("npy", "be_f4_2.npy", npy(">f4", [2], struct.pack(">2f", 1.5, -4.0)))
    write("npy", "bool_3.npy", npy("|b1", [3], b"\x01\x00\x01"))
    write("npy", "u1_scalar.npy", npy("|u1", [], b"\x07"))
    write("npy", "i2_empty.npy", npy("<i2", [0, 4], b"", version=3))

    def st(tensors, metadata=None):
        header, data = {}, b""
        if metadata is not None:
            header["__metadata__"] = metadata
        for name, (dtype, shape, raw) in tensors.items():
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        return struct.pack("<Q", len(h)) + h + data

    write("safetensors", "f32_bf16.safetensors", st({
        "out": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
        "out_bf16": ("BF16", [4], struct.pack("<4H", 0x3F80, 0x4000, 0x7FC0, 0xFF80)),
    }, {"format": "pt"}))
    write("safetensors", "mixed.safetensors", st({
        "a": ("F16", [3], struct.pack("<3H", 0x3C00, 0x8000, 0x7E00)),
        "b": ("I64", [1, 2], struct.pack("<2q", -5, 2**40)),
        "c": ("BOOL", [2], b"\x00\x01"),
        "d": ("U8", [0], b""),
        "e": ("F64", [], struct.pack("<d", 2.5)),
        "f": ("I32", [2], struct.pack("<2i", -1, 7)),
        "g": ("I16", [1], struct.pack("<h", -3)),
        "h": ("I8", [1], b"\xff"),
    }))
    write("safetensors", "empty.safetensors", st({}))


# ---------------------------------------------------------------- run folders


def run_folder(parts):
    """kopt_fuzz::RUN_FOLDER_FILES order: trace.jsonl, pass1-timing.csv,
    pass2-targeted.csv, pass3-deep.csv, trace.jsonl.4242, bare_steps.jsonl,
    run.json; None (or a part not given) leaves a file out."""
    return SEP.join(b"-" if p is None else b"+" + p for p in parts)


def run_folder_seeds():
    p1 = csv_head("moe-route-h200-profile/pass1-timing.csv", 6)
    p2 = csv_head("moe-route-h200-profile/pass2-targeted.csv", 3)
    p3 = csv_ids("moe-route-h200-profile/pass3-deep.csv", {0})
    trace = jsonl_head("kopt-trace-h200/moe_trace.jsonl", 60)
    write("run_folder", "ncu_three_passes", run_folder([None, p1, p2, p3, None]))
    write("run_folder", "tracer_and_targeted", run_folder([trace, None, p2, None, None]))
    write(
        "run_folder",
        "labeled_h200_two_passes",
        run_folder([None, csv_head("labeled-suite-h200-profile/profile_pass1_timing.csv", 5),
                    csv_head("labeled-suite-h200-profile/profile_pass2_targeted.csv", 2), None, None]),
    )
    one = b"""{"t":"process","pid":10}
{"t":"api","name":"cudaLaunchKernel","s":100,"e":105,"tid":1,"c":1}
{"t":"kernel","name":"first","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"window","s":100,"e":130}
{"t":"end","records":2,"dropped":0}
"""
    two = b"""{"t":"process","pid":11}
{"t":"api","name":"cudaLaunchKernel","s":50,"e":55,"tid":2,"c":1}
{"t":"kernel","name":"second","s":60,"e":90,"dev":0,"str":7,"c":1}
{"t":"window","s":40,"e":95}
"""
    write("run_folder", "two_processes", run_folder([one, None, None, None, two]))
    write(
        "run_folder",
        "stall_suite_h100",
        run_folder([fixture("stall-suite-h100/profile/trace.jsonl"), None,
                    csv_head("stall-suite-h100/profile/pass2-targeted.csv", 3), None, None, None,
                    fixture("stall-suite-h100/profile/run.json")]),
    )
    # A record with --kernel: the filter is applied to the passes again.
    record = json.loads(fixture("stall-suite-h100/profile/run.json"))
    record["kernel_filter"] = "stall_(divergent|barrier)|memset"
    write(
        "run_folder",
        "stall_suite_kernel_filter",
        run_folder([jsonl_head("stall-suite-h100/profile/trace.jsonl", 40), None,
                    csv_head("stall-suite-h100/profile/pass2-targeted.csv", 4), None, None, None,
                    json.dumps(record, indent=1).encode()]),
    )
    # A bare run's steps beside its trace: the bare-run prediction path.
    bare = b"\n".join(fixture("predictions-h200-bare/moe.bare_steps.jsonl").split(b"\n")[:12]) + b"\n"
    write(
        "run_folder",
        "moe_trace_bare_steps",
        run_folder([jsonl_head("predictions-h200-bare/moe.trace.jsonl.gz", 364), None, None, None, None, bare]),
    )
    # The same from `kopt profile --script` (the advice zoo).
    write(
        "run_folder",
        "script_bare_steps_h100",
        run_folder([jsonl_head("advice-h100/vit_hf_b64_bf16_eager-script/trace.jsonl.gz", 80), None, None, None, None,
                    fixture("advice-h100/vit_hf_b64_bf16_eager-script/bare_steps.jsonl")]),
    )


# ---------------------------------------------------------------- AMD: rocprofv3 JSON, rocpd


def rocprofv3_json_seeds():
    """The synthetic rocprofv3 JSON files, and a trimmed kernel trace."""
    for name in ["results.json", "counters_results.json"]:
        write("rocprofv3_json", name, fixture(f"amd/synthetic-rocprofv3-json/{name}"))
    import json

    doc = json.loads(fixture("amd/synthetic-rocprofv3-json/results.json"))
    proc = doc["rocprofiler-sdk-tool"][0]
    for key in ["kernel_dispatch", "hip_api"]:
        proc["buffer_records"][key] = proc["buffer_records"][key][:4]
    write("rocprofv3_json", "trace_4.json", json.dumps(doc).encode())


def rocpd_seeds():
    """Small rocpd databases on the real schema (fixtures/amd/rocpd-schema/):
    a kernel trace with HIP calls and a copy, and a counter collection."""
    import sqlite3
    import tempfile

    def build(rows):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "seed.db")
            c = sqlite3.connect(path)
            # Small pages keep the seed small (the schema alone is ~35 pages).
            c.execute("PRAGMA page_size = 512")
            for f in ["rocpd_tables.sql", "rocpd_views.sql", "data_views.sql"]:
                sql = fixture(f"amd/rocpd-schema/{f}").decode()
                sql = sql.replace("{{uuid}}", "_0001").replace("{{guid}}", "g0")
                c.executescript(sql)
            c.executescript(
                """
                INSERT INTO rocpd_info_node_0001 (id, hash, machine_id) VALUES (1, 1, 'm');
                INSERT INTO rocpd_info_process_0001 (id, nid, pid) VALUES (1, 1, 7);
                INSERT INTO rocpd_info_thread_0001 (id, nid, pid, tid) VALUES (1, 1, 1, 7);
                INSERT INTO rocpd_info_agent_0001 (id, nid, pid, type, absolute_index, name, product_name, extdata)
                  VALUES (2, 1, 1, 'GPU', 2, 'gfx942', 'AMD Instinct MI300X', '{"cu_count":304,"num_xcc":8,"wave_front_size":64}');
                INSERT INTO rocpd_info_queue_0001 (id, nid, pid, name) VALUES (1, 1, 1, 'q');
                INSERT INTO rocpd_info_stream_0001 (id, nid, pid, name) VALUES (0, 1, 1, 's');
                INSERT INTO rocpd_info_code_object_0001 (id, nid, pid, agent_id) VALUES (1, 1, 1, 2);
                INSERT INTO rocpd_info_kernel_symbol_0001 (id, nid, pid, code_object_id, display_name, arch_vgpr_count)
                  VALUES (1, 1, 1, 1, 'void add<float>(float*, int)', 16);
                INSERT INTO rocpd_string_0001 (id, string) VALUES (1, 'KERNEL_DISPATCH'), (2, 'HIP_RUNTIME_API_EXT'),
                  (3, 'hipLaunchKernel'), (4, 'MEMORY_COPY_HOST_TO_DEVICE'), (5, 'r');
                INSERT INTO rocpd_info_pmc_0001 (id, nid, pid, agent_id, name, symbol) VALUES (1, 1, 1, 2, 'FETCH_SIZE', 'FETCH_SIZE'),
                  (2, 1, 1, 2, 'GRBM_GUI_ACTIVE', 'GRBM_GUI_ACTIVE');
                """
            )
            for i in range(4):
                t = 1000 + i * 8000
                c.execute("INSERT INTO rocpd_event_0001 (id, category_id, correlation_id) VALUES (?, 1, ?)", (10 + i, i))
                c.execute(
                    "INSERT INTO rocpd_kernel_dispatch_0001 (nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, start, end,"
                    " workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id)"
                    " VALUES (1, 1, 1, 2, 1, ?, 1, 0, ?, ?, 256, 1, 1, 4096, 1, 1, 5, ?)",
                    (i + 1, t + 6000, t + 8000, 10 + i),
                )
                if rows == "trace":
                    c.execute("INSERT INTO rocpd_event_0001 (id, category_id, correlation_id) VALUES (?, 2, ?)", (50 + i, i))
                    c.execute(
                        "INSERT INTO rocpd_region_0001 (nid, pid, tid, start, end, name_id, event_id) VALUES (1, 1, 1, ?, ?, 3, ?)",
                        (t, t + 5000, 50 + i),
                    )
                else:
                    c.execute("INSERT INTO rocpd_pmc_event_0001 (event_id, pmc_id, value) VALUES (?, 1, 512.0)", (10 + i,))
                    c.execute("INSERT INTO rocpd_pmc_event_0001 (event_id, pmc_id, value) VALUES (?, 2, 9000.0)", (10 + i,))
            if rows == "trace":
                c.execute("INSERT INTO rocpd_event_0001 (id, category_id) VALUES (99, 1)")
                c.execute(
                    "INSERT INTO rocpd_memory_copy_0001 (nid, pid, tid, start, end, name_id, dst_agent_id, src_agent_id, size, event_id)"
                    " VALUES (1, 1, 1, 10, 500, 4, 2, 2, 4096, 99)"
                )
            c.commit()
            c.execute("VACUUM")
            c.close()
            with open(path, "rb") as f:
                return f.read()

    write("rocpd", "trace.db", build("trace"))
    write("rocpd", "counters.db", build("counters"))


# ---------------------------------------------------------------- gzip, demangler


def gzip_seeds():
    """Gzip'ed traces: small ones as the tools wrote them (torch.profiler,
    kopt), and hand-made ones (a broken Kineto trace, a kopt trace, two
    members: multi-member files are read whole)."""
    write("gzip", "torch_h200_matmuls.json.gz", raw_fixture("predictions-h200-bare/matmuls.pt.trace.json.gz"))
    write("gzip", "kopt_h100_matmuls.jsonl.gz", raw_fixture("predictions-h100-profiler/matmuls.trace.jsonl.gz"))
    broken = b'{"traceEvents": [{"ph": "X", "cat": "Kernel", "name": "C:\\qemp\\kern "quoted" x", "ts": 1.5, "dur": 2, "args": {"correlation": 7}}]}'
    write("gzip", "kineto.json.gz", gz(broken))
    trace = jsonl_head("stall-suite-h100/profile/trace.jsonl", 12)
    write("gzip", "kopt_trace.jsonl.gz", gz(trace))
    write("gzip", "two-members.gz", gz(trace) + gz(b""))


def raw_fixture(rel):
    with open(os.path.join(FIX, rel), "rb") as f:
        return f.read()


# Names the demangler must survive that no fixture holds: a bare prefix and
# special-name prefixes with nothing after them.
ODD_MANGLED = [b"_Z", b"_Z7TW", b"_ZG", b"_ZH", b"_ZJ", b"_ZK"]


def demangle_seeds(most=48):
    """Every distinct mangled name (`_Z...`) in the kopt traces and Kineto
    traces of the fixtures, gzip'ed ones too, plus ODD_MANGLED; at most
    `most` of them, spread over the sorted list."""
    names = set()
    for top, _, files in os.walk(FIX):
        for f in files:
            if not re.search(r"\.(jsonl|json)(\.gz)?$", f):
                continue
            rel = os.path.relpath(os.path.join(top, f), FIX)
            names.update(re.findall(rb"_Z[A-Za-z0-9_]{2,400}", fixture(rel)))
    names = sorted(names)
    if len(names) > most:
        names = [names[i * len(names) // most] for i in range(most)]
    for i, name in enumerate(ODD_MANGLED + names):
        write("demangle", "name%02d.txt" % i, name)


def main():
    # Clear only what this script writes: hand-made seeds of other targets stay.
    for target in GENERATED:
        d = os.path.join(OUT, target)
        if os.path.isdir(d):
            shutil.rmtree(d)
    ncu_seeds()
    kineto_seeds()
    kopt_trace_seeds()
    tensor_seeds()
    run_folder_seeds()
    rocprofv3_json_seeds()
    rocpd_seeds()
    gzip_seeds()
    demangle_seeds()
    total = 0
    for target in sorted(os.listdir(OUT)):
        if not os.path.isdir(os.path.join(OUT, target)):
            continue
        files = sorted(os.listdir(os.path.join(OUT, target)))
        sizes = [os.path.getsize(os.path.join(OUT, target, f)) for f in files] or [0]
        total += sum(sizes)
        assert max(sizes) < 100_000, (target, files, sizes)
        kept = "" if target in GENERATED else " (not generated here: kept)"
        print(f"{target}: {len(files)} seeds, {sum(sizes)} bytes (largest {max(sizes)}){kept}")
    assert total < 2_000_000, total
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
