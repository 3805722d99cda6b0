#!/usr/bin/python3
"""man/ipex-tool.1 against every `ipex-tool ... --help`: no option missing from either.

The subcommands are discovered from `ipex-tool --help` (and each subcommand's --help, for
nested ones such as `import gptq` if they appear). The rule the page is written to:

- A command's sections are the .SH and .SS headings whose title starts with the command's name
  in any case ("OPTIMIZE" is optimize's, "bench \\-\\-llm" is bench's; a nested command's title
  starts with its whole path, "import gptq", and its parent's sections count too).
- COMMON OPTIONS (.SH) documents the options every subcommand's --help lists (-q, -v, -h) and
  the top level's (--version, --help).
- Every long option of a command's --help is named in that command's sections (the common
  ones in COMMON OPTIONS, or in the command's sections).
- Every option the page names exists. In a command's sections it must be that command's,
  unless it is written right after another command's name ("optimize \\-\\-sample\\-input",
  "info \\-\\-limits"): then it must be that command's. In the other sections (DESCRIPTION,
  INPUT SPECS, LLM GENERATION, ENVIRONMENT, EXIT STATUS, ...) an option written after a
  command's name must be that command's and any other must be some command's; in SYNOPSIS and
  EXAMPLES an option belongs to the command its entry or line starts with.
- The SYNOPSIS entry of each command (".B ipex-tool CMD" up to the next entry) lists every long
  option of its --help but --help, --quiet and --verbose.
- "\\-\\-[no\\-]NAME" names both --NAME and --no-NAME; upper-case names (--KNOB) are
  placeholders and name nothing. roff comments (.\\") are not read.

Environment: IPEX_TOOL, the ipex-tool binary. Needs no fixtures.
"""

import os
import re
import shutil
import subprocess
import sys
import unittest
from typing import Dict, List, Optional, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
MAN_DIR = os.path.join(HERE, "..", "..", "man")
PAGE = os.path.join(MAN_DIR, "ipex-tool.1")
TOOL = os.environ.get("IPEX_TOOL")
if not TOOL:
    sys.exit("IPEX_TOOL is not set: run this test through ctest (ctest -R e2e.man_help) or export it")

COMMON_IN_SYNOPSIS_EXEMPT = {"--help", "--quiet", "--verbose"}
OPTION = re.compile(r"(?<![\w-])--(\[no-\])?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")


# ---------------------------------------------------------------------------------------------
# --help


def help_text(path: Tuple[str, ...]) -> str:
    proc = subprocess.run([TOOL, *path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"ipex-tool {' '.join(path)} --help exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def parse_help(text: str) -> Tuple[Set[str], List[str]]:
    """(long options, subcommand names) of one CLI11 help text."""
    options, subcommands = set(), []
    block = ""
    for line in text.splitlines():
        heading = re.match(r"^(\S[^:]*):\s*$", line)
        if heading:
            block = heading.group(1)
            continue
        # An option starts its line after two spaces: "  -q,--quiet", "  --dtype TEXT:{...}",
        # "  --replace-dropout,--no-replace-dropout{false}". Descriptions are indented further.
        names = re.match(r"^  ((?:-{1,2}[A-Za-z0-9][\w-]*)(?:,-{1,2}[A-Za-z0-9][\w-]*)*)", line)
        if names:
            options.update(n for n in names.group(1).split(",") if n.startswith("--"))
            continue
        if block == "Subcommands":
            sub = re.match(r"^  ([a-z][\w-]*)\s", line)
            if sub:
                subcommands.append(sub.group(1))
    return options, subcommands


def discover() -> Tuple[Set[str], Dict[Tuple[str, ...], Set[str]]]:
    """(top-level options, {command path: its long options}) for every (nested) subcommand."""
    top, subs = parse_help(help_text(()))
    commands: Dict[Tuple[str, ...], Set[str]] = {}
    todo = [(name,) for name in subs]
    while todo:
        path = todo.pop(0)
        options, nested = parse_help(help_text(path))
        commands[path] = options
        todo.extend(path + (name,) for name in nested)
    return top, commands


# ---------------------------------------------------------------------------------------------
# the page


def roff_text(line: str) -> str:
    """One roff line as plain text: macro name and quotes dropped, escapes resolved."""
    if line.startswith((".", "'")):
        line = re.sub(r"^[.']\s*[A-Za-z]+\s?", "", line).replace('"', "")
    line = re.sub(r"\\f(?:\[[^\]]*\]|\(..|.)", "", line)
    line = re.sub(r"\\\[[^\]]*\]|\\\(..", " ", line)
    line = line.replace("\\-", "-").replace("\\&", "").replace("\\~", " ").replace("\\ ", " ")
    return line.replace("\\e", "\\")


class Section:
    def __init__(self, kind: str, title: str):
        self.kind, self.title = kind, title
        self.raw: List[str] = []

    def text(self) -> str:
        return " ".join(roff_text(line) for line in self.raw if not line.startswith(('.\\"', "'\\\"")))


def read_page(path: str) -> List[Section]:
    sections = [Section("", "")]
    with open(path) as f:
        for line in f.read().splitlines():
            m = re.match(r'^\.(SH|SS)\s+(.*)$', line)
            if m:
                sections.append(Section(m.group(1), roff_text(m.group(2)).strip()))
            else:
                sections[-1].raw.append(line)
    return sections


def named_options(text: str) -> List[Tuple[str, int]]:
    """(option, offset) of every option the text names; --[no-]X names --X and --no-X."""
    found = []
    for m in OPTION.finditer(text):
        found.append(("--" + m.group(2), m.start()))
        if m.group(1):
            found.append(("--no-" + m.group(2), m.start()))
    return found


class ManPageAndHelp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.top, cls.commands = discover()
        cls.sections = read_page(PAGE)
        names = sorted({p[0] for p in cls.commands} | {" ".join(p) for p in cls.commands}, key=len, reverse=True)
        # "optimize --x" or "ipex-tool optimize --x": the option is optimize's.
        cls.prefix = re.compile(r"(?:^|[\s(\[|,;:])(?:ipex-tool\s+)?(" + "|".join(map(re.escape, names)) + r")\s+$")
        every = [opts for opts in cls.commands.values()]
        cls.common = set.intersection(*every) if every else set()
        cls.any_option = set().union(*every) | cls.top

    # -- helpers ------------------------------------------------------------------------------

    def owner_of(self, section: Section) -> Optional[Tuple[str, ...]]:
        """The command whose section this is (longest matching path), or None."""
        words = section.title.lower().split()
        best = None
        for path in self.commands:
            if tuple(words[:len(path)]) == path and (best is None or len(path) > len(best)):
                best = path
        return best

    def sections_of(self, path: Tuple[str, ...]) -> List[Section]:
        mine = []
        for s in self.sections:
            owner = self.owner_of(s)
            if owner is not None and path[:len(owner)] == owner:
                mine.append(s)
        return mine

    def section_named(self, title: str) -> Optional[Section]:
        return next((s for s in self.sections if s.kind == "SH" and s.title.upper() == title), None)

    def written_after_command(self, text: str, offset: int) -> Optional[Tuple[str, ...]]:
        m = self.prefix.search(text[max(0, offset - 80):offset])
        return tuple(m.group(1).split()) if m else None

    def synopsis_entries(self) -> Dict[Tuple[str, ...], str]:
        """{command path: text of its SYNOPSIS entries}; () for the bare `ipex-tool` entry."""
        synopsis = self.section_named("SYNOPSIS")
        self.assertIsNotNone(synopsis, "the page has no SYNOPSIS")
        entries: Dict[Tuple[str, ...], List[str]] = {}
        current: Optional[Tuple[str, ...]] = None
        for line in synopsis.raw:
            m = re.match(r"^\.B\s+ipex-tool(?:\s+(.*))?$", line)
            if m:
                words = roff_text(m.group(1) or "").split()
                current = ()
                for path in sorted(self.commands, key=len, reverse=True):
                    if tuple(words[:len(path)]) == path:
                        current = path
                        break
            if current is not None and not line.startswith('.\\"'):
                entries.setdefault(current, []).append(roff_text(line))
        return {path: " ".join(lines) for path, lines in entries.items()}

    # -- tests --------------------------------------------------------------------------------

    def test_commands_were_found(self):
        self.assertIn(("optimize",), self.commands, "ipex-tool --help lists no 'optimize': the help format changed?")
        for path, options in self.commands.items():
            self.assertIn("--help", options, f"no options parsed from 'ipex-tool {' '.join(path)} --help'")

    def test_every_command_has_a_section(self):
        for path in self.commands:
            with self.subTest(command=" ".join(path)):
                self.assertTrue(any(self.owner_of(s) == path for s in self.sections),
                                f"no .SH/.SS titled '{' '.join(path)}' in {PAGE}")

    def test_every_help_option_is_in_its_man_section(self):
        common_section = self.section_named("COMMON OPTIONS")
        self.assertIsNotNone(common_section, "the page has no COMMON OPTIONS section")
        common_named = {o for o, _ in named_options(common_section.text())}
        for path, options in self.commands.items():
            with self.subTest(command=" ".join(path)):
                named = {o for s in self.sections_of(path) for o, _ in named_options(s.text())}
                missing = {o for o in options if o not in named and not (o in self.common and o in common_named)}
                self.assertEqual(missing, set(),
                                 f"in 'ipex-tool {' '.join(path)} --help', not in its man section(s)")
        self.assertEqual(self.top - common_named, set(), "top-level options not in COMMON OPTIONS")

    def test_every_option_the_page_names_exists(self):
        wrong = []
        for s in self.sections:
            if s.kind == "SH" and s.title.upper() in ("SYNOPSIS", "EXAMPLES"):
                continue  # by entry or line: test_synopsis_and_examples_name_real_options
            text = s.text()
            owner = self.owner_of(s)
            for option, offset in named_options(text):
                named_for = self.written_after_command(text, offset)
                if named_for is not None and named_for in self.commands:
                    ok = option in self.commands[named_for] or option in self.top
                    where = " ".join(named_for)
                elif owner is not None:
                    ok = option in self.commands[owner]
                    where = " ".join(owner)
                elif s.kind == "SH" and s.title.upper() == "COMMON OPTIONS":
                    ok = option in self.common or option in self.top
                    where = "every command"
                else:
                    ok = option in self.any_option
                    where = "any command"
                if not ok:
                    wrong.append(f"{option} (section '{s.title}', looked up in {where})")
        self.assertEqual(wrong, [], "options the man page names that --help does not list")

    def test_synopsis_and_examples_name_real_options(self):
        entries = self.synopsis_entries()
        wrong = []
        for path, text in entries.items():
            known = self.commands.get(path, self.top) if path else self.top
            wrong += [f"SYNOPSIS ipex-tool {' '.join(path)}: {o}" for o, _ in named_options(text) if o not in known]
        examples = self.section_named("EXAMPLES")
        if examples is not None:
            # Lines joined where they end in a backslash (continued commands).
            joined = re.sub(r"\\\s*\n\s*", " ", "\n".join(roff_text(l) for l in examples.raw))
            for line in joined.splitlines():
                m = re.search(r"ipex-tool\s+(\S+)", line)
                if not m or (m.group(1),) not in self.commands:
                    continue
                known = self.commands[(m.group(1),)]
                wrong += [f"EXAMPLES: {line.strip()}: {o}" for o, _ in named_options(line) if o not in known]
        self.assertEqual(wrong, [], "options of SYNOPSIS/EXAMPLES lines that the command's --help does not list")

    def test_synopsis_lists_every_option(self):
        entries = self.synopsis_entries()
        for path, options in self.commands.items():
            with self.subTest(command=" ".join(path)):
                self.assertIn(path, entries, f"no SYNOPSIS entry '.B ipex-tool {' '.join(path)}'")
                named = {o for o, _ in named_options(entries[path])}
                self.assertEqual(options - COMMON_IN_SYNOPSIS_EXEMPT - named, set(),
                                 f"in 'ipex-tool {' '.join(path)} --help', not in its SYNOPSIS entry")
        self.assertEqual(self.top - COMMON_IN_SYNOPSIS_EXEMPT - {o for o, _ in named_options(entries.get((), ""))},
                         set(), "top-level options not in the SYNOPSIS")

    def test_pages_render_without_warnings(self):
        if not shutil.which("man"):
            self.skipTest("man is not installed (Debian package man-db)")
        for name in sorted(os.listdir(MAN_DIR)):
            with self.subTest(page=name):
                proc = subprocess.run(["man", "--warnings", "-l", os.path.join(MAN_DIR, name)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
                                      env=dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0"))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stderr.strip(), "", f"{name}: warnings")


if __name__ == "__main__":
    unittest.main()
