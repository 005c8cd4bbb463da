# SPDX-License-Identifier: GPL-2.0
"""Run a selection of rdma-core's pyverbs test suite and record every test's outcome.

    python3 runner.py SUITE_DIR RESULTS_TSV PER_TEST_SECONDS -- [run_tests.py options] [NAME...]

SUITE_DIR is a writable, gunzipped copy of /usr/share/doc/rdma-core/tests/ (prepared by run.sh).
The run_tests.py options (--dev, --gid, --port, -v) are parsed by the suite's own args_parser,
as run_tests.py does. NAMEs are test modules or tests relative to the suite package ("test_pd",
"test_device.DeviceTest.test_query_port"); without any, every test_*.py module is loaded, like
run_tests.py. Unlike run_tests.py, only the named modules are imported (importing all 50 of
them costs seconds under TCG).

unittest's own (verbose) report goes to stdout/stderr as usual. In addition every test's
outcome is written to RESULTS_TSV, one "STATUS<TAB>TEST ID<TAB>DETAIL" line each, STATUS one of
ok, skip, FAIL, ERROR; DETAIL is the skip reason or the last line of the traceback. A test that
runs longer than PER_TEST_SECONDS is interrupted (SIGALRM) and counts as an ERROR.
"""
import importlib
import os
import signal
import sys
import types
import unittest


class TestTimeout(Exception):
    pass


def _last_line(err_text):
    lines = [ln for ln in err_text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ''


class RecordingResult(unittest.TextTestResult):
    per_test = 0
    records = []

    def _record(self, status, test, detail=''):
        detail = ' '.join(str(detail).split())
        self.records.append((status, test.id(), detail))

    def startTest(self, test):
        if self.per_test:
            signal.alarm(self.per_test)
        super().startTest(test)

    def stopTest(self, test):
        signal.alarm(0)
        super().stopTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record('ok', test)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record('ok', test, 'expected failure')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record('FAIL', test, 'unexpected success')

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record('skip', test, reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record('FAIL', test, _last_line(self.failures[-1][1]))

    def addError(self, test, err):
        super().addError(test, err)
        self._record('ERROR', test, _last_line(self.errors[-1][1]))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = 'FAIL' if issubclass(err[0], test.failureException) else 'ERROR'
            self._record(kind, subtest, _last_line(self._exc_info_to_string(err, test)))


def _on_alarm(signum, frame):
    raise TestTimeout(f'test ran longer than {RecordingResult.per_test} s (runner.py per-test limit)')


def main():
    suite_dir, results_path, per_test = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = sys.argv[4:]
    if rest[:1] == ['--']:
        rest = rest[1:]
    suite_dir = os.path.abspath(suite_dir)
    sys.path.insert(0, suite_dir)
    sys.argv = [os.path.join(suite_dir, 'run_tests.py')] + rest
    from args_parser import parser
    parser.parse_args()  # leaves unittest's own arguments (-v, NAMEs) in sys.argv
    args = sys.argv[1:]
    verbosity = 2 if '--verbose' in args else 1
    names = [a for a in args if not a.startswith('-')]

    # The suite is the package "tests" (its modules do "from tests.base import ..."). Create it
    # empty rather than running its __init__.py, which imports every test module.
    pkg = types.ModuleType('tests')
    pkg.__path__ = [suite_dir]
    pkg.__file__ = os.path.join(suite_dir, '__init__.py')
    sys.modules['tests'] = pkg
    if not names:
        names = sorted(f[:-3] for f in os.listdir(suite_dir)
                       if f.startswith('test_') and f.endswith('.py'))
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in names:
        importlib.import_module('tests.' + name.split('.')[0])
        suite.addTests(loader.loadTestsFromName(name, pkg))

    RecordingResult.per_test = per_test
    signal.signal(signal.SIGALRM, _on_alarm)
    runner = unittest.TextTestRunner(verbosity=verbosity, resultclass=RecordingResult)
    try:
        result = runner.run(suite)
    finally:
        with open(results_path, 'w') as f:
            for status, tid, detail in RecordingResult.records:
                f.write(f'{status}\t{tid}\t{detail}\n')
    return 0 if result.wasSuccessful() else 1


if __name__ == '__main__':
    sys.exit(main())
