"""Every file and store directory tfprof writes goes through here, so that no one's data is lost.

What this module promises (docs/SECURITY.md):

* An existing path is replaced only when the caller says ``force=True`` (the CLI's ``--force``);
  otherwise ``OutputError`` names the path and ``--force``, and nothing is written.
* An input of the command is never written over, not even with ``force``: the target is
  compared with every input by resolved path and by ``os.path.samefile`` (symbolic and hard
  links included); a path inside an input directory (a store) counts as an input, and so does a
  directory that holds an input; a checkpoint prefix stands for its ``.index`` and ``.data-*``.
* Data is written to a temporary sibling (``.<name>.<random>``, same directory, so the same file
  system) and renamed into place: a reader sees the old file or the new one, never half of one.
  Without ``force`` the file is placed by a hard link, which fails if the name was taken after
  the check. On any failure, ``KeyboardInterrupt`` and the CLI's termination signal included,
  the temporary is removed and the old file is untouched (the cleanup runs to its end even if
  the signal's exception is raised a second time meanwhile, see ``files._undo``).
* A written file gets the mode a plain ``open(path, "w")`` would give it (0666 less the umask),
  a directory the mode of ``mkdir`` (0777 less the umask), not ``mkstemp``'s private 0600.
* Several files written together (a timeline's ``<outfile>_<step>``) are all checked before
  any is written, and renamed into place only once every one is complete.
* A directory (a store) is built in a temporary sibling directory and swapped in when complete.
  An existing directory is replaced only with ``force`` and only if the caller recognises every
  file in it as its own (``owned``); then only those files are deleted, never anything else.

The package is a leaf: it imports nothing of tfprof but its errors. ``targets`` decides whether a
path may be written, ``files`` writes files, ``directories`` builds and swaps store directories.
"""

from tfprof.output.directories import check_directory, new_directory
from tfprof.output.files import write_file, write_files
from tfprof.output.targets import Data, Inputs, PathLike, check_target, input_paths

__all__ = ["Data", "Inputs", "PathLike", "check_directory", "check_target", "input_paths", "new_directory",
           "write_file", "write_files"]
