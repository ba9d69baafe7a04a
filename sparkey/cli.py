"""Command line (API layer): ``python -m sparkey COMMAND``, one function per command.

Commands: ``info``, ``get``, ``dump``, ``create``, ``append``, ``write-index``, ``rewrite``,
``verify``.

Exit status: 0 on success, 1 on an error (message on stderr), 2 when ``get`` finds no such key
(as libsparkey's tool does; a line on stderr says so; argparse also uses 2 for usage errors).
``create`` and ``rewrite`` refuse an existing target store unless given ``--force``.
``create``, ``write-index`` and ``rewrite`` write the checksum sidecar with ``--checksums``;
``verify`` checks a store against it (exit 1 naming the damaged range, or saying it is stale).
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from sparkey.checksums import checksum_path, verify_checksums
from sparkey.errors import IndexFormatError, LogFormatError, SparkeyError, StoreExistsError
from sparkey.format import Compression, IndexHeader, LogHeader, file_pair
from sparkey.index import METHODS, read_index_header, write_index
from sparkey.log import LogReader, LogWriter, read_log_header
from sparkey.reader import Reader
from sparkey.table import RULES
from sparkey.writer import Writer

EXIT_ERROR = 1
EXIT_NOT_FOUND = 2


def main(argv: list[str] | None = None, stdin: IO[bytes] | None = None,
         stdout: IO[bytes] | None = None) -> int:
    """Run the command line and return the exit status (streams default to the process's)."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    args = _parser().parse_args(argv)
    try:
        return args.command(args, stdin, stdout) or 0
    except StoreExistsError as exc:
        print(f"sparkey: error: {exc.filename} exists; pass --force to replace the store",
              file=sys.stderr)
        return EXIT_ERROR
    except (SparkeyError, OSError, ValueError) as exc:
        print(f"sparkey: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sparkey",
                                     description="Inspect and write Sparkey stores.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="print the headers of .spl and .spi files")
    info.add_argument("files", nargs="+", metavar="FILE")
    info.set_defaults(command=_info)

    get = commands.add_parser("get", help="print the value of a key and a newline (exit 2 if "
                                          "absent)")
    get.add_argument("store", help="base name, .spl or .spi file")
    get.add_argument("key")
    get.add_argument("--hex", action="store_true", help="KEY is hex; print the value as hex")
    get.set_defaults(command=_get)

    dump = commands.add_parser("dump", help="print live entries as KEY<TAB>VALUE lines")
    dump.add_argument("store")
    dump.add_argument("--hex", action="store_true", help="print keys and values as hex")
    dump.add_argument("--log", action="store_true",
                      help="print every raw log entry (PUT and DELETE) instead")
    dump.set_defaults(command=_dump)

    create = commands.add_parser("create", help="create an empty store (log and index)")
    _add_log_options(create)
    create.add_argument("log", metavar="FILE.spl")
    _add_force_option(create)
    _add_checksums_option(create)
    create.set_defaults(command=_create)

    append = commands.add_parser(
        "append", help="append KEY<TAB>VALUE lines from stdin to a log (a malformed line stops "
                       "the command; the lines before it are kept)")
    append.add_argument("-d", "--delimiter", default="\t", help="key/value separator (tab)")
    append.add_argument("log", metavar="FILE.spl")
    append.set_defaults(command=_append)

    index = commands.add_parser("write-index", help="build the .spi index of a log")
    index.add_argument("log", metavar="FILE.spl")
    _add_index_options(index)
    _add_checksums_option(index)
    index.set_defaults(command=_write_index)

    rewrite = commands.add_parser(
        "rewrite", help="copy the live entries into a new store (drops deleted and replaced "
                        "entries), then index it")
    _add_log_options(rewrite)
    rewrite.add_argument("source", help="store to read")
    rewrite.add_argument("target", help="store to create")
    _add_index_options(rewrite)
    _add_force_option(rewrite)
    _add_checksums_option(rewrite)
    rewrite.set_defaults(command=_rewrite)

    verify = commands.add_parser(
        "verify", help="check the log and index against their checksum sidecar (.spc)")
    verify.add_argument("store", help="base name, .spl or .spi file")
    verify.set_defaults(command=_verify)
    return parser


def _add_log_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--compression", default="none",
                        choices=[c.name.lower() for c in Compression])
    parser.add_argument("-b", "--block-size", type=int, default=4096,
                        help="largest uncompressed block (compressed logs; default 4096)")


def _add_force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--force", action="store_true",
                        help="replace an existing store (refused otherwise)")


def _add_checksums_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checksums", action="store_true",
                        help="also write the checksum sidecar (.spc) that verify checks")


def _write_mode(args: argparse.Namespace) -> str:
    """The ``Writer`` mode of a command that creates a store: replace only with ``--force``."""
    return "w" if args.force else "x"


def _add_index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hash-size", type=int, choices=(4, 8), help="default: automatic")
    parser.add_argument("--rules", choices=RULES, default="canonical")
    parser.add_argument("--seed", type=int, help="hash seed (default: random)")
    parser.add_argument("--method", choices=METHODS, default="memory")


def _index_options(args: argparse.Namespace) -> dict[str, Any]:
    return dict(hash_size=args.hash_size, rules=args.rules, hash_seed=args.seed,
                method=args.method)


def _info(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    for path in args.files:
        header: LogHeader | IndexHeader
        try:
            kind, header = "log", read_log_header(path)
        except LogFormatError as log_error:
            if log_error.field != "magic":
                raise
            try:
                kind, header = "index", read_index_header(path)
            except IndexFormatError as index_error:
                if index_error.field != "magic":
                    raise
                raise SparkeyError(f"{path} is neither a Sparkey log nor a Sparkey index "
                                   "(unknown magic number)") from None
        lines = [f"{path}: Sparkey {kind} file"]
        for name in header.__dataclass_fields__:
            value = getattr(header, name)
            shown = value.name if isinstance(value, Compression) else value
            lines.append(f"  {name}: {shown}")
        stdout.write(("\n".join(lines) + "\n").encode())


def _get(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    key = bytes.fromhex(args.key) if args.hex else args.key.encode("utf-8")
    with Reader(args.store) as reader:
        value = reader.get(key)
    if value is None:
        print(f"sparkey: key {args.key!r} not found in {args.store}", file=sys.stderr)
        return EXIT_NOT_FOUND
    stdout.write((value.hex().encode() if args.hex else value) + b"\n")
    return 0


def _dump(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    if args.log:
        with LogReader(file_pair(args.store)[0]) as log:
            for entry in log:
                fields = [entry.kind.name.encode(), entry.key]
                if entry.value is not None:
                    fields.append(entry.value)
                stdout.write(_line(fields, args.hex, raw_first=True))
        return
    with Reader(args.store) as reader:
        for key, value in reader.items():
            stdout.write(_line([key, value], args.hex))


def _line(fields: list[bytes], as_hex: bool, raw_first: bool = False) -> bytes:
    shown = [field if (not as_hex or (raw_first and i == 0)) else field.hex().encode()
             for i, field in enumerate(fields)]
    return b"\t".join(shown) + b"\n"


def _create(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    Writer(args.log, args.compression, args.block_size, mode=_write_mode(args),
           checksums=args.checksums).close()


def _append(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    delimiter = args.delimiter.encode("utf-8")
    if not delimiter:
        raise ValueError("the delimiter must not be empty")
    with LogWriter.append(args.log) as writer:
        for number, line in enumerate(stdin, start=1):
            line = line[:-1] if line.endswith(b"\n") else line
            key, found, value = line.partition(delimiter)
            if not found:
                raise ValueError(f"stdin line {number} has no {args.delimiter!r} between key "
                                 "and value")
            writer.put(key, value)


def _write_index(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    log_path, index_path = file_pair(args.log)
    write_index(index_path, log_path, checksums=args.checksums, **_index_options(args))


def _rewrite(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    with Reader(args.source) as reader, Writer(args.target, args.compression, args.block_size,
                                               mode=_write_mode(args),
                                               checksums=args.checksums,
                                               **_index_options(args)) as writer:
        for key, value in reader.items():
            writer.put(key, value)


def _verify(args: argparse.Namespace, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    log_path, index_path = file_pair(args.store)
    sidecar = verify_checksums(log_path, index_path)
    chunks = len(sidecar.log_crcs) + len(sidecar.index_crcs)
    stdout.write(f"{log_path} ({sidecar.log.file_bytes} bytes) and {index_path} "
                 f"({sidecar.index.file_bytes} bytes): {chunks} chunks of {sidecar.chunk_bytes} "
                 f"bytes match {checksum_path(index_path)}\n".encode())
