"""The protobuf messages tfprof reads and writes: the .proto files and their generated modules."""
