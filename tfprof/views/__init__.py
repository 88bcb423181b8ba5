"""Rendering: tfprof's text reports, protos, timelines, pprof, tables and HTML from query results."""
