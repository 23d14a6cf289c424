#include <cstdio>
#include <doctest/doctest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "spank/stderr_tail.hpp"

using namespace shardnet;

TEST_CASE("stderr tail: the last ten lines, whole, without the trailing newline") {
    std::string text;
    for (int i = 1; i <= 14; ++i) text += "line " + std::to_string(i) + "\n";
    text += "\n\n";
    CHECK(clean_stderr_tail(text, true) == "line 5\nline 6\nline 7\nline 8\nline 9\nline 10\nline 11\nline 12\nline 13\nline 14");
    CHECK(clean_stderr_tail("one line, no newline", true) == "one line, no newline");
    CHECK(clean_stderr_tail("", true) == "");
    CHECK(clean_stderr_tail("\n \n\t\n", true) == "");
    // Read from inside the file: the first line is cut, so it is left out.
    CHECK(clean_stderr_tail("of a line\nwhole\nlast", false) == "whole\nlast");
    // Unless it is the only one: its end, from a character's start.
    CHECK(clean_stderr_tail("\x82\xac euro", false) == " euro");
}

TEST_CASE("stderr tail: plain text only") {
    // Colours and cursor moves go with their parameters; a title (OSC) too.
    CHECK(clean_stderr_tail("\x1b[1;31mERROR\x1b[0m: out of memory", true) == "ERROR: out of memory");
    CHECK(clean_stderr_tail("\x1b]0;title\x07shown\x1b]8;;http://x\x1b\\link", true) == "shownlink");
    // C0 (but tab), DEL and C1 (U+009B is a CSI to some terminals) are dropped.
    CHECK(clean_stderr_tail(std::string("a\0b\x01\x7f\tc", 7) + "\xc2\x9b" "2J\xc2\xa0" "d", true) == "ab\tc2J\xc2\xa0" "d");
    // Not UTF-8: U+FFFD for each bad byte (an overlong slash, a surrogate, a lone continuation).
    CHECK(clean_stderr_tail("x\xc0\xafy\xed\xa0\x80z\x80", true) == "x\xef\xbf\xbd\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbd");
    CHECK(clean_stderr_tail("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x94\xa5", true) == "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x94\xa5");
    // A progress bar's carriage returns: what the terminal showed last; CRLF is a newline.
    CHECK(clean_stderr_tail("10%|#  \r50%|### \r100%|#####\r\nRuntimeError: boom\r\n", true) == "100%|#####\nRuntimeError: boom");
    // Markup is text like any other (the dashboard shows it as text).
    CHECK(clean_stderr_tail("<script>alert(1)</script>", true) == "<script>alert(1)</script>");
}

TEST_CASE("stderr tail: never more than its bound, even when U+FFFD triples bytes") {
    const std::string bad(kStderrTailBytes, '\xff');
    const std::string t = clean_stderr_tail(bad, true);
    CHECK(t.size() <= kStderrTailBytes);
    CHECK(t.size() >= kStderrTailBytes - 2);
    CHECK(t.substr(0, 3) == "\xef\xbf\xbd");   // cut at a character's start
    std::string lines;
    for (int i = 0; i < 10; ++i) lines += std::string(1000, 'a' + i) + "\n";
    const std::string u = clean_stderr_tail(lines, true);
    CHECK(u.size() <= kStderrTailBytes);
    CHECK(u.substr(0, 1000) == std::string(1000, 'g'));   // whole lines, the last ones
    CHECK(u.size() == 4 * 1000 + 3);
}

TEST_CASE("stderr tail: read from a regular file's end only") {
    char tmpl[] = "/tmp/shardnet-stderr-XXXXXX";
    const int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    std::string text = "first line\n" + std::string(5000, 'x') + "\nTraceback (most recent call last):\nValueError: bad batch\n";
    REQUIRE(write(fd, text.data(), text.size()) == ssize_t(text.size()));
    close(fd);
    std::string err;
    CHECK(read_stderr_tail(tmpl, err) == "Traceback (most recent call last):\nValueError: bad batch");
    CHECK(err.empty());
    unlink(tmpl);
    CHECK(read_stderr_tail(tmpl, err) == "");
    CHECK(err.find("No such file") != std::string::npos);
    // A FIFO would block a reader that waits for a writer: refused at once.
    REQUIRE(mkfifo(tmpl, 0600) == 0);
    CHECK(read_stderr_tail(tmpl, err) == "");
    CHECK(err == std::string(tmpl) + ": not a regular file");
    unlink(tmpl);
    CHECK(read_stderr_tail("/dev/null", err) == "");
    CHECK(err == "/dev/null: not a regular file");
}
