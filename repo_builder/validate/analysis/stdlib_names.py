"""The standard library's top-level module names per Python version: what a Python step imports from its
image's Python without shipping anything. Data, generated once and committed: validate never runs a Python
to ask (the one running validate is the builder's, not the image's).

Generated from each interpreter's own ``sys.stdlib_module_names`` (CPython 3.10.13, 3.11.7, 3.12.1, 3.13.0;
patch releases do not change the list). It agrees with "What's New": 3.11 adds ``tomllib`` and removes
``binhex``; 3.12 removes ``distutils``, ``imp``, ``asynchat``, ``asyncore`` and ``smtpd`` (PEP 632, 594);
3.13 removes the rest of PEP 594's dead batteries (``cgi``, ``cgitb``, ``crypt``, ``telnetlib``, ``lib2to3``,
``imghdr``, ``pipes`` ...). Regenerate for a new version with
``python3.X -c "import sys; print(' '.join(sorted(sys.stdlib_module_names)))"`` and add its row.
"""

from __future__ import annotations

# In every version of the table.
_COMMON = """
__future__ _abc _aix_support _ast _asyncio _bisect _blake2 _bz2 _codecs _codecs_cn _codecs_hk
_codecs_iso2022 _codecs_jp _codecs_kr _codecs_tw _collections _collections_abc _compat_pickle
_compression _contextvars _csv _ctypes _curses _curses_panel _datetime _dbm _decimal _elementtree
_frozen_importlib _frozen_importlib_external _functools _gdbm _hashlib _heapq _imp _io _json _locale
_lsprof _lzma _markupbase _md5 _multibytecodec _multiprocessing _opcode _operator _osx_support
_overlapped _pickle _posixshmem _posixsubprocess _py_abc _pydecimal _pyio _queue _random _scproxy _sha1
_sha3 _signal _sitebuiltins _socket _sqlite3 _sre _ssl _stat _statistics _string _strptime _struct
_symtable _thread _threading_local _tkinter _tracemalloc _uuid _warnings _weakref _weakrefset _winapi
_zoneinfo abc antigravity argparse array ast asyncio atexit base64 bdb binascii bisect builtins bz2
cProfile calendar cmath cmd code codecs codeop collections colorsys compileall concurrent configparser
contextlib contextvars copy copyreg csv ctypes curses dataclasses datetime dbm decimal difflib dis
doctest email encodings ensurepip enum errno faulthandler fcntl filecmp fileinput fnmatch fractions
ftplib functools gc genericpath getopt getpass gettext glob graphlib grp gzip hashlib heapq hmac html
http idlelib imaplib importlib inspect io ipaddress itertools json keyword linecache locale logging lzma
mailbox marshal math mimetypes mmap modulefinder msvcrt multiprocessing netrc nt ntpath nturl2path
numbers opcode operator optparse os pathlib pdb pickle pickletools pkgutil platform plistlib poplib
posix posixpath pprint profile pstats pty pwd py_compile pyclbr pydoc pydoc_data pyexpat queue quopri
random re readline reprlib resource rlcompleter runpy sched secrets select selectors shelve shlex shutil
signal site smtplib socket socketserver sqlite3 sre_compile sre_constants sre_parse ssl stat statistics
string stringprep struct subprocess symtable sys sysconfig syslog tabnanny tarfile tempfile termios
textwrap this threading time timeit tkinter token tokenize trace traceback tracemalloc tty turtle
turtledemo types typing unicodedata unittest urllib uuid venv warnings wave weakref webbrowser winreg
winsound wsgiref xml xmlrpc zipapp zipfile zipimport zlib zoneinfo
"""

# Only in some versions (the names each version has beyond _COMMON).
_ONLY: dict[str, str] = {
    "3.10": """
        _bootsubprocess _crypt _msi _sha256 _sha512 aifc asynchat asyncore audioop binhex cgi cgitb
        chunk crypt distutils imghdr imp lib2to3 mailcap msilib nis nntplib ossaudiodev pipes smtpd
        sndhdr spwd sunau telnetlib uu xdrlib
    """,
    "3.11": """
        _bootsubprocess _crypt _msi _sha256 _sha512 _tokenize _typing aifc asynchat asyncore audioop cgi
        cgitb chunk crypt distutils imghdr imp lib2to3 mailcap msilib nis nntplib ossaudiodev pipes
        smtpd sndhdr spwd sunau telnetlib tomllib uu xdrlib
    """,
    "3.12": """
        _crypt _msi _pydatetime _pylong _sha2 _tokenize _typing aifc audioop cgi cgitb chunk crypt
        imghdr lib2to3 mailcap msilib nis nntplib ossaudiodev pipes sndhdr spwd sunau telnetlib tomllib
        uu xdrlib
    """,
    "3.13": """
        _android_support _colorize _interpchannels _interpqueues _interpreters _ios_support
        _opcode_metadata _pydatetime _pylong _pyrepl _sha2 _suggestions _sysconfig _tokenize _typing
        _wmi tomllib
    """,
}

STDLIB_VERSIONS = tuple(_ONLY)  # ("3.10", "3.11", "3.12", "3.13")
_COMMON_NAMES = frozenset(_COMMON.split())
_TABLE: dict[str, frozenset[str]] = {}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2])


def table_version(python: str) -> str:
    """The table row that stands for ``python``: its own, else the newest older one, else the oldest (an
    image's Python the table lacks is judged by its nearest predecessor; the report names the image's own)."""
    if python in _ONLY:
        return python
    older = [v for v in STDLIB_VERSIONS if _key(v) <= _key(python)]
    return older[-1] if older else STDLIB_VERSIONS[0]


def stdlib_modules(python: str) -> frozenset[str]:
    """The standard library's top-level module names of Python ``python`` ("3.12")."""
    version = table_version(python)
    names = _TABLE.get(version)
    if names is None:
        names = _TABLE[version] = _COMMON_NAMES | frozenset(_ONLY[version].split())
    return names
