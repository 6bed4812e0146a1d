#include "railyard/base/hmac.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace railyard::base {
namespace {

std::string Hex(const Sha256Digest& d) {
  return ToHex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

// FIPS 180-4 examples (NIST CSRC "SHA256.pdf" and the SHA-2 one-million-'a' vector).
TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(Hex(Sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hex(Sha256("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu")),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Hex(Sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundary (55, 56, 63, 64 bytes) take different padding paths.
TEST(Sha256Test, PaddingBoundariesDiffer) {
  std::set<std::string> seen;
  for (size_t n : {55, 56, 57, 63, 64, 65, 119, 120}) {
    seen.insert(Hex(Sha256(std::string(n, 'x'))));
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(Hex(Sha256(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

// RFC 4231 section 4 test cases 1-4, 6, 7 (5 is a truncated output).
TEST(HmacSha256Test, Rfc4231Vectors) {
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  EXPECT_EQ(Hex(HmacSha256(key4, std::string(50, '\xcd'))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  std::string long_key(131, '\xaa');
  EXPECT_EQ(Hex(HmacSha256(long_key, "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(Hex(HmacSha256(long_key,
                           "This is a test using a larger than block-size key and a larger "
                           "than block-size data. The key needs to be hashed before being "
                           "used by the HMAC algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256Test, KeyAndMessageBothMatter) {
  auto base = HmacSha256("secret", "railyard-store nonce");
  EXPECT_NE(base, HmacSha256("secreT", "railyard-store nonce"));
  EXPECT_NE(base, HmacSha256("secret", "railyard-store nonce2"));
  EXPECT_EQ(base, HmacSha256("secret", "railyard-store nonce"));
}

TEST(ConstantTimeEqualTest, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEqual("", ""));
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "xbc"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEqual(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(RandomBytesTest, LengthAndVariety) {
  EXPECT_EQ(RandomBytes(0).size(), 0u);
  std::string a = RandomBytes(16);
  std::string b = RandomBytes(16);
  EXPECT_EQ(a.size(), 16u);
  EXPECT_NE(a, b);  // 2^-128 chance of a false failure
  EXPECT_EQ(RandomBytes(100000).size(), 100000u);
}

TEST(ToHexTest, LowerCaseTwoDigitsPerByte) {
  EXPECT_EQ(ToHex(""), "");
  EXPECT_EQ(ToHex(std::string("\x00\x0f\xa0\xff", 4)), "000fa0ff");
}

}  // namespace
}  // namespace railyard::base
