// kjit keygen NAME: an Ed25519 key pair for signing the remote cache's entries — NAME.secret for
// the build boxes that write (KJIT_SIGNING_KEY), NAME.public for the trusted-keys file of every
// machine that reads (KJIT_TRUSTED_KEYS).
#include <kjit/signing.hpp>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct KeygenOptions {
    std::string name;
    std::string dir = ".";
};

int keygen(const KeygenOptions& o) {
    const SigningKey key = generate_signing_key(o.name);
    const auto [secret, pub] = write_key_pair(key, o.dir);
    fmt::print("{}\n", key.public_key().line());
    std::fflush(stdout);  // the key line first, also where both streams go to one pipe
    fmt::print(stderr,
               "kjit: wrote {} (mode 0600: keep it on the machines that publish) and {}; add the line above to the "
               "trusted-keys file of every machine that reads\n",
               secret.string(), pub.string());
    return ok;
}

}  // namespace

void add_keygen(CLI::App& app, int& exit_code) {
    auto* sub = app.add_subcommand("keygen", "Make an Ed25519 key pair for signing remote cache entries (no GPU)");
    static KeygenOptions o;
    sub->add_option("name", o.name, "Key name, numbered to rotate: fleet-1, fleet-2 …")->required();
    sub->add_option("--dir", o.dir, "Where NAME.secret and NAME.public go (default: here)")
        ->check(CLI::ExistingDirectory);
    sub->callback([&exit_code] { exit_code = keygen(o); });
}

}  // namespace kjit::cli
