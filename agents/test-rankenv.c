/* SPDX-License-Identifier: MIT */
/* The rank environment: precedence of the layers, sorting, and refusals. */
#include <errno.h>
#include <string.h>

#include "rankenv.h"
#include "test-util.h"

static size_t envp_count(char **envp) {
        size_t n = 0;
        while (envp[n])
                n++;
        return n;
}

static const char *envp_get(char **envp, const char *key) {
        size_t len = strlen(key);
        for (char **e = envp; *e; e++)
                if (strncmp(*e, key, len) == 0 && (*e)[len] == '=')
                        return *e + len + 1;
        return NULL;
}

static void test_layers(const AgentInventory *inv) {
        setenv("HOME", "/home/agent", 1);
        setenv("PATH", "/agent/bin", 1);
        setenv("SECRET_OF_AGENT", "x", 1);
        json_t *env = json_pack("{s:s, s:s, s:s, s:s}", "PATH", "/job/bin", "AXCTL_RANK", "3",
                                "AXCTL_PROGRESS_FILE", "/job/tries/to/override", "A_B", "1");
        RankEnvRequest req = { .env = env, .progress_path = "/state/ranks/1-1-3/progress" };
        char **envp = NULL;
        char *error = NULL;
        CHECK(agent_env_build(&req, inv, &envp, &error) == 0);
        CHECK(!error);
        /* The job's PATH wins over the agent's; HOME is filled in. */
        CHECK(strcmp(envp_get(envp, "PATH"), "/job/bin") == 0);
        CHECK(strcmp(envp_get(envp, "HOME"), "/home/agent") == 0);
        CHECK(strcmp(envp_get(envp, "AXCTL_RANK"), "3") == 0);
        /* The agent owns the progress file. */
        CHECK(strcmp(envp_get(envp, "AXCTL_PROGRESS_FILE"), "/state/ranks/1-1-3/progress") == 0);
        /* Nothing else leaks from the agent's environment. */
        CHECK(!envp_get(envp, "SECRET_OF_AGENT"));
        /* Sorted by key, "A_B" before "AXCTL_...", and "AXCTL_PROGRESS_FILE" before "AXCTL_RANK". */
        for (size_t i = 1; envp[i]; i++) {
                size_t a = strcspn(envp[i - 1], "="), b = strcspn(envp[i], "=");
                int c = strncmp(envp[i - 1], envp[i], a < b ? a : b);
                CHECK(c < 0 || (c == 0 && a < b));
        }
        agent_env_free(envp);
        json_decref(env);
}

static void test_refusals(const AgentInventory *inv) {
        char **envp = NULL;
        char *error = NULL;

        json_t *bad_env = json_pack("{s:i}", "N", 3);
        RankEnvRequest req = { .env = bad_env, .progress_path = "/p" };
        CHECK(agent_env_build(&req, inv, &envp, &error) == -EINVAL);
        CHECK(error && strstr(error, "\"N\""));
        free(error);
        error = NULL;
        json_decref(bad_env);

        json_t *devices = json_pack("[i]", (json_int_t) inv->n_devs);
        req = (RankEnvRequest){ .devices = devices, .progress_path = "/p" };
        CHECK(agent_env_build(&req, inv, &envp, &error) == -ENODEV);
        CHECK(error && strstr(error, "not in this node's inventory"));
        free(error);
        error = NULL;
        json_decref(devices);

        devices = json_pack("[s]", "0");
        req = (RankEnvRequest){ .devices = devices, .progress_path = "/p" };
        CHECK(agent_env_build(&req, inv, &envp, &error) < 0);
        free(error);
        json_decref(devices);
}

static void test_no_env(const AgentInventory *inv) {
        unsetenv("LANG");
        json_t *devices = json_array();
        RankEnvRequest req = { .devices = devices, .progress_path = "/p",
                               .accelerator = "none", .profile_dir = "/nonexistent" };
        char **envp = NULL;
        char *error = NULL;
        CHECK(agent_env_build(&req, inv, &envp, &error) == 0);
        CHECK(envp_get(envp, "AXCTL_PROGRESS_FILE"));
        CHECK(!envp_get(envp, "LANG"));
        CHECK(envp_count(envp) >= 3); /* progress file, PATH, HOME */
        agent_env_free(envp);
        json_decref(devices);
}

int main(void) {
        /* No devices: only the vendor-neutral layers are exercised here. */
        AgentInventory inv = { .cpus = 4, .memory_mb = 1024, .numa_nodes = 1 };
        test_layers(&inv);
        test_refusals(&inv);
        test_no_env(&inv);
        return 0;
}
