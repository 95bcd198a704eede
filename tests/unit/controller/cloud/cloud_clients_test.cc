#include "controller/cloud/cloud_clients.h"

#include <gtest/gtest.h>

namespace sbx::controller {
namespace {

TEST(CloudClientsTest, WorkspaceIdIsNamespaceSlashRef) {
  EXPECT_EQ(WorkspaceId("team-a", "default"), "team-a/default");
  EXPECT_EQ(ParseWorkspaceId("team-a/default"),
            (std::pair<std::string, std::string>("team-a", "default")));
  EXPECT_EQ(ParseWorkspaceId(WorkspaceId("ns", "ws"))->second, "ws");
  EXPECT_FALSE(ParseWorkspaceId("no-slash"));
}

// One transport serves both clients in sbxd: the api label tells them apart by path.
TEST(CloudClientsTest, CloudApiOfTellsOpenAiAndDatabricksCallsApart) {
  EXPECT_EQ(CloudApiOf("https://api.openai.com/v1/agents/sessions"), "openai");
  EXPECT_EQ(CloudApiOf("http://127.0.0.1:9/v1/agents/environments/e1"), "openai");
  EXPECT_EQ(CloudApiOf("https://h/api/2.0/sandboxes?page_size=100"), "databricks");
  EXPECT_EQ(CloudApiOf("https://h/oidc/v1/token"), "databricks");
}

}  // namespace
}  // namespace sbx::controller
