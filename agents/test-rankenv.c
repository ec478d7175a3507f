/* SPDX-License-Identifier: MIT */
/*
 * The rank environment: precedence of the layers, sorting, refusals, and on a synthetic
 * HGX H100 host the device visibility of the NVIDIA backend and a launch profile.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
        setenv("LANG", "C.UTF-8", 1);
        setenv("LD_PRELOAD", "/agent/lib.so", 1);
        setenv("CREDENTIALS_DIRECTORY", "/run/credentials/axagent.service", 1);
        json_t *env = json_pack("{s:s, s:s, s:s, s:s, s:s}", "PATH", "/job/bin", "AXCTL_RANK", "3",
                                "AXCTL_PROGRESS_FILE", "/job/tries/to/override", "A_B", "1", "USER",
                                "mallory");
        RankUser user = {.name = "alice", .home = "/home/alice", .shell = "/bin/bash"};
        RankEnvRequest req = {
                .env = env, .progress_path = "/state/ranks/1-1-3/progress", .user = &user};
        char **envp = NULL;
        char *error = NULL;
        CHECK(agent_env_build(&req, inv, &envp, &error) == 0);
        CHECK(!error);
        /* The job's PATH wins over the agent's; LANG is filled in. */
        CHECK(strcmp(envp_get(envp, "PATH"), "/job/bin") == 0);
        CHECK(strcmp(envp_get(envp, "LANG"), "C.UTF-8") == 0);
        /* Identity comes from the account the rank runs as, never from the agent or job. */
        CHECK(strcmp(envp_get(envp, "HOME"), "/home/alice") == 0);
        CHECK(strcmp(envp_get(envp, "USER"), "alice") == 0);
        CHECK(strcmp(envp_get(envp, "LOGNAME"), "alice") == 0);
        CHECK(strcmp(envp_get(envp, "SHELL"), "/bin/bash") == 0);
        CHECK(!envp_get(envp, "LD_PRELOAD") && !envp_get(envp, "CREDENTIALS_DIRECTORY"));
        CHECK(strcmp(envp_get(envp, "AXCTL_RANK"), "3") == 0);
        /* The agent owns the progress file. */
        CHECK(strcmp(envp_get(envp, "AXCTL_PROGRESS_FILE"), "/state/ranks/1-1-3/progress") == 0);
        /* Nothing else leaks from the agent's environment. */
        CHECK(!envp_get(envp, "SECRET_OF_AGENT"));
        /* Sorted by key: "A_B", "AXCTL_PROGRESS_FILE", "AXCTL_RANK", "HOME", ... */
        for (size_t i = 1; envp[i]; i++) {
                size_t a = strcspn(envp[i - 1], "="), b = strcspn(envp[i], "=");
                int c = strncmp(envp[i - 1], envp[i], a < b ? a : b);
                CHECK(c < 0 || (c == 0 && a < b));
        }
        agent_env_free(envp);

        /* The shared environment the rank names comes with its own; the agent's layers
         * still win over both. */
        json_t *shared = json_pack("{s:s,s:s}", "AXCTL_NODE_HOSTNAMES", "h1,h2",
                                   "AXCTL_PROGRESS_FILE", "/shared/tries/too");
        req.shared_env = shared;
        CHECK(agent_env_build(&req, inv, &envp, &error) == 0);
        CHECK(strcmp(envp_get(envp, "AXCTL_NODE_HOSTNAMES"), "h1,h2") == 0);
        CHECK(strcmp(envp_get(envp, "AXCTL_RANK"), "3") == 0);
        CHECK(strcmp(envp_get(envp, "AXCTL_PROGRESS_FILE"), "/state/ranks/1-1-3/progress") == 0);
        agent_env_free(envp);
        json_decref(shared);
        json_decref(env);
}

static void test_refusals(const AgentInventory *inv) {
        char **envp = NULL;
        char *error = NULL;

        json_t *bad_env = json_pack("{s:i}", "N", 3);
        RankEnvRequest req = {.env = bad_env, .progress_path = "/p"};
        CHECK(agent_env_build(&req, inv, &envp, &error) == -EINVAL);
        CHECK(error && strstr(error, "\"N\""));
        free(error);
        error = NULL;
        json_decref(bad_env);

        json_t *devices = json_pack("[i]", (json_int_t) inv->n_devs);
        req = (RankEnvRequest){.devices = devices, .progress_path = "/p"};
        CHECK(agent_env_build(&req, inv, &envp, &error) == -ENODEV);
        CHECK(error && strstr(error, "not in this node's inventory"));
        free(error);
        error = NULL;
        json_decref(devices);

        devices = json_pack("[s]", "0");
        req = (RankEnvRequest){.devices = devices, .progress_path = "/p"};
        CHECK(agent_env_build(&req, inv, &envp, &error) < 0);
        free(error);
        json_decref(devices);
}

static void test_no_env(const AgentInventory *inv) {
        unsetenv("LANG");
        json_t *devices = json_array();
        RankEnvRequest req = {.devices = devices,
                              .progress_path = "/p",
                              .accelerator = "none",
                              .profile_dir = "/nonexistent"};
        char **envp = NULL;
        char *error = NULL;
        CHECK(agent_env_build(&req, inv, &envp, &error) == 0);
        CHECK(envp_get(envp, "AXCTL_PROGRESS_FILE"));
        CHECK(!envp_get(envp, "LANG"));
        CHECK(envp_count(envp) >= 2); /* progress file, PATH */
        agent_env_free(envp);
        json_decref(devices);
}

static void test_gpus(const char *xml) {
        _cleanup_free_ char *root = test_fake_nvidia_root(8);
        AccelConfig cfg = {.dev_root = root, .sys_root = root};
        AgentInventory inv;
        CHECK(agent_inventory_load(&inv, xml, &cfg) == 0);
        CHECK(inv.n_devs == 8);

        _cleanup_free_ char *profiles = xasprintf("%s/profiles", root);
        CHECK(mkdir(profiles, 0755) == 0);
        _cleanup_free_ char *generic = xasprintf("%s/nvidia.env", profiles);
        _cleanup_free_ char *h100 = xasprintf("%s/nvidia-h100.env", profiles);
        test_write(generic, "# all NVIDIA GPUs\nNCCL_DEBUG=INFO\nFOO=profile\n");
        test_write(h100, "XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true\n");

        json_t *env = json_pack("{s:s, s:s}", "FOO", "job", "CUDA_VISIBLE_DEVICES", "0,1,2");
        json_t *devices = json_pack("[i, i]", 3, 1);
        RankEnvRequest req = {.env = env,
                              .devices = devices,
                              .accelerator = "nvidia-h100",
                              .profile_dir = profiles,
                              .progress_path = "/p"};
        char **envp = NULL;
        char *error = NULL;
        CHECK(agent_env_build(&req, &inv, &envp, &error) == 0);
        /* The devices given, whatever the job's env claimed. */
        CHECK(strcmp(envp_get(envp, "CUDA_VISIBLE_DEVICES"), "1,3") == 0);
        CHECK(strcmp(envp_get(envp, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID") == 0);
        /* Profile keys fill in, the job's own win. */
        CHECK(strcmp(envp_get(envp, "FOO"), "job") == 0);
        CHECK(strcmp(envp_get(envp, "NCCL_DEBUG"), "INFO") == 0);
        CHECK(strstr(envp_get(envp, "XLA_FLAGS"), "latency_hiding"));
        agent_env_free(envp);
        json_decref(devices);

        /* A rank given no GPU on a GPU node sees none. */
        req.devices = NULL;
        req.accelerator = NULL;
        CHECK(agent_env_build(&req, &inv, &envp, &error) == 0);
        CHECK(strcmp(envp_get(envp, "CUDA_VISIBLE_DEVICES"), "") == 0);
        CHECK(!envp_get(envp, "NCCL_DEBUG"));
        agent_env_free(envp);

        json_decref(env);
        agent_inventory_deinit(&inv);
        util_rm_rf(root);
}

int main(void) {
        /* No devices: only the vendor-neutral layers are exercised here. */
        AgentInventory inv = {.cpus = 4, .memory_mb = 1024, .numa_nodes = 1};
        test_layers(&inv);
        test_refusals(&inv);
        test_no_env(&inv);

        const char *dir = getenv("TOPOLOGIES_DIR");
        _cleanup_free_ char *xml = xasprintf("%s/nvidia-h100x8.xml", dir ? dir : ".");
        if (access(xml, R_OK) < 0) {
                fprintf(stderr, "%s not found: skipping the GPU checks\n", xml);
                return TEST_SKIP;
        }
        test_gpus(xml);
        return 0;
}
