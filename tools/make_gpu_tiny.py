"""Build tests/fixtures/gpu_tiny/profile.pb with the real tfprof from its hand-written text protos.

Usage: tfprof-reference python tools/make_gpu_tiny.py   (the reference Python, tools/_reference.py)

graph.pbtxt and run_meta_0.pbtxt (a GraphDef and a RunMetadata laid out as a GPU trace: canonical
device, stream:all, stream:N, memcpy, a second canonical device, MEMCPY and _retval nodes) are
converted to binary, and the real tool builds a ProfileProto from them. tests/test_run_meta_rules.py
checks that our ingest of the text files equals our ingest of the real tool's profile.
"""

from pathlib import Path

from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.util import _pywrap_tfprof as tfprof

HERE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gpu_tiny"

graph = text_format.Parse((HERE / "graph.pbtxt").read_text(), graph_pb2.GraphDef()).SerializeToString()
run_meta = text_format.Parse((HERE / "run_meta_0.pbtxt").read_text(), config_pb2.RunMetadata()).SerializeToString()
tfprof.NewProfiler(graph, b"")
tfprof.AddStep(0, graph, run_meta, b"")
tfprof.WriteProfile(str(HERE / "profile.pb").encode())
print(HERE / "profile.pb")
