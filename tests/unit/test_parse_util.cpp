#include <csignal>
#include <doctest/doctest.h>

#include "common/parse_util.hpp"

using namespace shardnet;

TEST_CASE("parse_int accepts whole numbers in range only") {
    CHECK(parse_int("42", 1, 100) == 42);
    CHECK_FALSE(parse_int("0", 1, 100));
    CHECK_FALSE(parse_int("101", 1, 100));
    CHECK_FALSE(parse_int("", 1, 100));
    CHECK_FALSE(parse_int("4x", 1, 100));
    CHECK_FALSE(parse_int(" 4", 1, 100));
    CHECK_FALSE(parse_int("+4", 1, 100));
    CHECK_FALSE(parse_int("-4", 0, 100));
    CHECK(parse_int("-4", -10, 10) == -4);
    CHECK_FALSE(parse_int("99999999999999999999", 0, 1000));
}

TEST_CASE("parse_signal knows names and numbers but never KILL or STOP") {
    CHECK(parse_signal("USR1") == SIGUSR1);
    CHECK(parse_signal("SIGTERM") == SIGTERM);
    CHECK(parse_signal("12") == 12);
    CHECK(parse_signal("9") == 0);
    CHECK(parse_signal("19") == 0);
    CHECK(parse_signal("KILL") == 0);
    CHECK(parse_signal("usr1") == 0);
    CHECK(signal_name(SIGUSR2) == "SIGUSR2");
}

TEST_CASE("safe names") {
    CHECK(is_safe_name("run-01.a_b"));
    CHECK_FALSE(is_safe_name(""));
    CHECK_FALSE(is_safe_name(".hidden"));
    CHECK_FALSE(is_safe_name("-flag"));
    CHECK_FALSE(is_safe_name("a/b"));
    CHECK_FALSE(is_safe_name("a b"));
    CHECK_FALSE(is_safe_name(std::string(65, 'a')));
    CHECK(has_control_chars("a\nb"));
    CHECK_FALSE(has_control_chars("plain"));
}

TEST_CASE("is_valid_utf8 takes well-formed UTF-8 only") {
    CHECK(is_valid_utf8(""));
    CHECK(is_valid_utf8("node-01"));
    CHECK(is_valid_utf8("n\xc3\xb6" "de"));             // U+00F6
    CHECK(is_valid_utf8("\xe2\x82\xac"));             // U+20AC
    CHECK(is_valid_utf8("\xf0\x9f\x9a\x80"));         // U+1F680
    CHECK(is_valid_utf8("\xf4\x8f\xbf\xbf"));         // U+10FFFF
    CHECK_FALSE(is_valid_utf8("\xff"));
    CHECK_FALSE(is_valid_utf8("\x80"));                 // a lone continuation byte
    CHECK_FALSE(is_valid_utf8("\xc3"));                 // cut short
    CHECK_FALSE(is_valid_utf8("\xe2\x82"));
    CHECK_FALSE(is_valid_utf8("\xc0\xaf"));             // overlong '/'
    CHECK_FALSE(is_valid_utf8("\xe0\x80\xaf"));
    CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));         // a surrogate, U+D800
    CHECK_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));     // past U+10FFFF
    CHECK_FALSE(is_valid_utf8("\xe2(\xa1"));         // ASCII where a continuation byte belongs
    CHECK_FALSE(is_valid_utf8("\xe2\x82("));
}

TEST_CASE("valid_utf8: each byte that starts no character becomes U+FFFD; the rest stays as it was") {
    const std::string r = "\xEF\xBF\xBD";
    CHECK(valid_utf8("") == "");
    CHECK(valid_utf8("n\xc3\xb6" "de \xf0\x9f\x9a\x80") == "n\xc3\xb6" "de \xf0\x9f\x9a\x80");
    CHECK(valid_utf8("x\xffy") == "x" + r + "y");
    CHECK(valid_utf8("\xe2\x82") == r + r);                 // cut short: each byte
    CHECK(valid_utf8("\xc0\xaf") == r + r);                 // overlong
    CHECK(valid_utf8("\xed\xa0\x80") == r + r + r);        // a surrogate
    CHECK(valid_utf8("\xe2(\xa1") == r + "(" + r);
    CHECK(valid_utf8(std::string("a\0b", 3)) == std::string("a\0b", 3));   // NUL is UTF-8: control characters are another check
    std::string s = "ok";
    CHECK_FALSE(make_valid_utf8(s));
    s = "{\"name\":\"x\xff\"}";
    CHECK(make_valid_utf8(s));
    CHECK(s == "{\"name\":\"x" + r + "\"}");   // serialized JSON stays JSON: only its strings change
    for (const char *bad : {"\xff", "\x80\x80", "\xf4\x90\x80\x80", "a\xc3"}) CHECK(is_valid_utf8(valid_utf8(bad)));
}

TEST_CASE("percent encoding of a query value, and back; bad escapes refused") {
    CHECK(percent_encode("/shared/images/train-1.0_x~") == "/shared/images/train-1.0_x~");
    CHECK(percent_encode("/a b/c&d=e%f") == "/a%20b/c%26d%3De%25f");
    CHECK(percent_encode("\xc3\xa9") == "%C3%A9");
    for (std::string s : {std::string("/a b/c&d=e%f"), std::string("\x01\xff/x"), std::string()})
        CHECK(percent_decode(percent_encode(s)) == s);
    CHECK(percent_decode("%2fx%2F") == "/x/");
    CHECK_FALSE(percent_decode("%"));
    CHECK_FALSE(percent_decode("%4"));
    CHECK_FALSE(percent_decode("a%zz"));
}
