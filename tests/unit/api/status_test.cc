#include "api/status.h"

#include <gtest/gtest.h>

namespace sbx::api {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) {
    return InvalidArgumentError("odd");
  }
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return OkStatus();
}

TEST(StatusTest, DefaultIsOkAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeMessageAndRetryHint) {
  Status s = ResourceExhaustedError("slow down").WithRetryAfter(std::chrono::seconds(3));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.ToString(), "RESOURCE_EXHAUSTED: slow down");
  ASSERT_TRUE(s.retry_after().has_value());
  EXPECT_EQ(*s.retry_after(), std::chrono::milliseconds(3000));
  EXPECT_EQ(s.Annotate("create sandbox").message(), "create sandbox: slow down");
}

TEST(StatusTest, MacrosPropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(2).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

TEST(StatusDeathTest, ValueOfErrorAborts) {
  StatusOr<int> s = NotFoundError("x");
  EXPECT_DEATH((void)s.value(), "StatusOr::value\\(\\) on an error");
}

}  // namespace
}  // namespace sbx::api
