#include "server/client/shard_target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpc/grpc.h"

namespace tf_reverb {
namespace {

bool ValidPort(absl::string_view port) {
  int value = 0;
  return !port.empty() && port.size() <= 5 &&
         port.find_first_not_of("0123456789") == absl::string_view::npos &&
         absl::SimpleAtoi(port, &value) && value >= 1 && value <= 65535;
}

bool IsIpv4Literal(absl::string_view host) {
  in_addr addr;
  return inet_pton(AF_INET, std::string(host).c_str(), &addr) == 1;
}

bool IsIpv6Literal(absl::string_view host) {
  // A zone ("%eth0") is gRPC's business; only the address is checked.
  const std::string bare(host.substr(0, host.find('%')));
  in6_addr addr;
  return inet_pton(AF_INET6, bare.c_str(), &addr) == 1;
}

// "A:P" of the ipv4: scheme.
absl::Status CheckIpv4Address(absl::string_view target, absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || !IsIpv4Literal(address.substr(0, colon)) ||
      !ValidPort(address.substr(colon + 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid address '", address, "' in target '", target,
                     "': an ipv4: target lists IPV4_ADDRESS:PORT entries separated by ','"));
  }
  return absl::OkStatus();
}

// "[A]:P" of the ipv6: scheme.
absl::Status CheckIpv6Address(absl::string_view target, absl::string_view address) {
  const size_t close = address.rfind("]:");
  if (!absl::StartsWith(address, "[") || close == absl::string_view::npos ||
      !IsIpv6Literal(address.substr(1, close - 1)) || !ValidPort(address.substr(close + 2))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid address '", address, "' in target '", target,
                     "': an ipv6: target lists [IPV6_ADDRESS]:PORT entries separated by ','"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardTarget> ParseShardTarget(absl::string_view target) {
  ShardTarget result;
  result.target = std::string(target);
  const bool ipv4 = absl::StartsWith(target, "ipv4:");
  const bool ipv6 = absl::StartsWith(target, "ipv6:");
  if (ipv4 || ipv6) {
    absl::string_view list = target.substr(5);
    // The URI forms "ipv4:///A:P" and "ipv4://A:P" name the same addresses.
    if (!absl::ConsumePrefix(&list, "///")) absl::ConsumePrefix(&list, "//");
    if (list.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("Target '", target, "' names no address"));
    }
    for (absl::string_view address : absl::StrSplit(list, ',')) {
      absl::Status valid =
          ipv4 ? CheckIpv4Address(target, address) : CheckIpv6Address(target, address);
      if (!valid.ok()) return valid;
      if (std::find(result.addresses.begin(), result.addresses.end(), address) !=
          result.addresses.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Target '", target, "' names the server ", address, " twice"));
      }
      result.addresses.emplace_back(address);
    }
    result.kind =
        result.addresses.size() > 1 ? ShardTarget::Kind::kList : ShardTarget::Kind::kSingle;
    if (!result.sharded()) result.addresses = {result.target};
    return result;
  }
  if (absl::StartsWith(target, "dns:")) {
    absl::string_view name = target.substr(4);
    if (absl::ConsumePrefix(&name, "//")) {
      // dns://AUTHORITY/NAME: the authority (a DNS server) may be empty.
      const size_t slash = name.find('/');
      if (slash == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("Invalid target '", target, "': expected dns:///NAME:PORT"));
      }
      name = name.substr(slash + 1);
    }
    absl::string_view host, port;
    if (absl::StartsWith(name, "[")) {
      const size_t close = name.rfind("]:");
      if (close != absl::string_view::npos) {
        host = name.substr(1, close - 1);
        port = name.substr(close + 2);
      }
    } else if (const size_t colon = name.rfind(':'); colon != absl::string_view::npos) {
      host = name.substr(0, colon);
      port = name.substr(colon + 1);
    }
    if (host.empty() || !ValidPort(port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Invalid target '", target,
                       "': a dns: target needs NAME:PORT (e.g. dns:///replay:8000)"));
    }
    result.kind = ShardTarget::Kind::kDns;
    result.dns_host = std::string(host);
    result.dns_port = std::string(port);
    return result;
  }
  result.addresses = {result.target};
  return result;
}

absl::StatusOr<std::vector<std::string>> ResolveShards(const ShardTarget& target) {
  if (target.kind != ShardTarget::Kind::kDns) return target.addresses;
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int error = getaddrinfo(target.dns_host.c_str(), target.dns_port.c_str(), &hints, &found);
  if (error != 0) {
    return absl::UnavailableError(absl::StrCat("Could not resolve '", target.dns_host,
                                               "' of target '", target.target,
                                               "': ", gai_strerror(error)));
  }
  // A dual-stack server has an A and an AAAA record: one shard, not two.
  // IPv4 addresses when the name has any, else its IPv6 ones.
  std::vector<std::string> addresses, ipv6_addresses;
  absl::flat_hash_set<std::string> seen;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    char text[INET6_ADDRSTRLEN] = {0};
    std::string address;
    if (entry->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ai_addr);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      address = absl::StrCat(text, ":", target.dns_port);
    } else if (entry->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ai_addr);
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
      address = absl::StrCat("[", text, "]:", target.dns_port);
    } else {
      continue;
    }
    if (!seen.insert(address).second) continue;
    (entry->ai_family == AF_INET ? addresses : ipv6_addresses).push_back(std::move(address));
  }
  freeaddrinfo(found);
  if (addresses.empty()) addresses = std::move(ipv6_addresses);
  if (addresses.empty()) {
    return absl::UnavailableError(
        absl::StrCat("'", target.dns_host, "' of target '", target.target, "' has no IP address"));
  }
  return addresses;
}

std::string ShardChannelTarget(const std::string& address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.rfind("]:");
    if (close != std::string::npos && IsIpv6Literal(address.substr(1, close - 1))) {
      return absl::StrCat("ipv6:", address);
    }
    return address;
  }
  const size_t colon = address.rfind(':');
  if (colon != std::string::npos && IsIpv4Literal(address.substr(0, colon))) {
    return absl::StrCat("ipv4:", address);
  }
  return address;
}

void ConfigureShardedChannel(grpc::ChannelArguments* args) {
  args->SetServiceConfigJSON(kShardedServiceConfigJson);
  args->SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kShardReconnectMaxBackoffMs);
}

}  // namespace tf_reverb
