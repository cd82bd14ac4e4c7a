//! Command names: tickfan's own verbs ([`classify`] into a [`Verb`]) and
//! Redis 7.0.15's whole command table, so that a command tickfan does not
//! execute is resolved as Redis would resolve it ([`check_redis_command`]:
//! unknown, unknown subcommand, wrong arity, or valid) and refused with
//! Redis's error (see [`super::errors`]).
//!
//! The table was generated from `COMMAND` on a stock `redis-server` 7.0.15:
//! `(name, arity, subcommands)` sorted by name, so a lookup is a binary
//! search with the name folded to lower case on the fly, never allocating.

/// ASCII case-insensitive byte-string equality (how Redis looks up command
/// names). Never allocates.
pub(crate) fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The commands tickfan executes on subscriber connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Verb {
    /// `SUBSCRIBE channel [channel ...]`
    Subscribe,
    /// `UNSUBSCRIBE [channel ...]`
    Unsubscribe,
    /// `PSUBSCRIBE pattern [pattern ...]`
    Psubscribe,
    /// `PUNSUBSCRIBE [pattern ...]`
    Punsubscribe,
    /// `PING [message]`
    Ping,
    /// `QUIT` (any arguments are ignored, as in Redis 7.0)
    Quit,
    /// `RESET`
    Reset,
    /// Anything else; see
    /// [`append_subscribed_context_rejection`](super::append_subscribed_context_rejection).
    Other,
}

impl Verb {
    /// Redis's lower-case command name, as used in error messages
    /// (`None` for [`Verb::Other`]).
    pub(crate) fn name(self) -> Option<&'static str> {
        Some(match self {
            Verb::Subscribe => "subscribe",
            Verb::Unsubscribe => "unsubscribe",
            Verb::Psubscribe => "psubscribe",
            Verb::Punsubscribe => "punsubscribe",
            Verb::Ping => "ping",
            Verb::Quit => "quit",
            Verb::Reset => "reset",
            Verb::Other => return None,
        })
    }

    /// Whether Redis accepts `argc` arguments (command name included) for
    /// this verb; if not, reply with
    /// [`append_wrong_arity`](super::append_wrong_arity). Always `true` for
    /// [`Verb::Other`].
    pub(crate) fn accepts_arg_count(self, argc: usize) -> bool {
        match self {
            Verb::Subscribe | Verb::Psubscribe => argc >= 2,
            Verb::Unsubscribe | Verb::Punsubscribe | Verb::Quit | Verb::Other => argc >= 1,
            Verb::Ping => (1..=2).contains(&argc),
            Verb::Reset => argc == 1,
        }
    }
}

/// Classifies a command name case-insensitively, without allocating.
pub(crate) fn classify(name: &[u8]) -> Verb {
    let candidate = match name.len() {
        4 if name[0].eq_ignore_ascii_case(&b'p') => Verb::Ping,
        4 => Verb::Quit,
        5 => Verb::Reset,
        9 => Verb::Subscribe,
        10 => Verb::Psubscribe,
        11 => Verb::Unsubscribe,
        12 => Verb::Punsubscribe,
        _ => return Verb::Other,
    };
    match candidate.name() {
        Some(n) if eq_ignore_case(name, n.as_bytes()) => candidate,
        _ => Verb::Other,
    }
}

/// How Redis 7.0 would resolve a command before executing it
/// (`lookupCommand()` followed by the arity check in `processCommand()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandCheck {
    /// Not a Redis command: [`append_unknown_command`](super::append_unknown_command).
    Unknown,
    /// A container command (`CONFIG`, `CLIENT`, ...) with an unknown
    /// subcommand: [`append_unknown_subcommand`](super::append_unknown_subcommand).
    UnknownSubcommand,
    /// Known command, wrong number of arguments:
    /// [`append_wrong_arity`](super::append_wrong_arity).
    WrongArity {
        /// Redis's full name, e.g. `get` or `memory|usage`.
        fullname: &'static str,
    },
    /// A well-formed call of a real Redis command.
    Valid {
        /// Redis's full name, e.g. `get` or `config|get`.
        fullname: &'static str,
    },
}

/// Whether `name` (any case) is a Redis 7.0.15 command.
#[cfg(test)]
pub(crate) fn is_known_redis_command(name: &[u8]) -> bool {
    lookup_command(name).is_some()
}

/// Resolves a command the way Redis 7.0 does: `name` is the first argument,
/// `second` the second one if any, `argc` the total argument count.
pub(crate) fn check_redis_command(name: &[u8], second: Option<&[u8]>, argc: usize) -> CommandCheck {
    let Some(&(base_name, base_arity, subs)) = lookup_command(name) else {
        return CommandCheck::Unknown;
    };
    let (fullname, arity) = match second {
        Some(sub) if argc > 1 && !subs.is_empty() => {
            match subs.binary_search_by(|&(full, _)| {
                cmp_lowercase(&full.as_bytes()[base_name.len() + 1..], sub)
            }) {
                Ok(i) => subs[i],
                Err(_) => return CommandCheck::UnknownSubcommand,
            }
        }
        _ => (base_name, base_arity),
    };
    let arity_ok = if arity >= 0 {
        argc == arity as usize
    } else {
        argc >= arity.unsigned_abs() as usize
    };
    if arity_ok {
        CommandCheck::Valid { fullname }
    } else {
        CommandCheck::WrongArity { fullname }
    }
}

fn lookup_command(name: &[u8]) -> Option<&'static CommandEntry> {
    REDIS_COMMANDS
        .binary_search_by(|&(n, _, _)| cmp_lowercase(n.as_bytes(), name))
        .ok()
        .map(|i| &REDIS_COMMANDS[i])
}

/// Compares a lower-case table entry with `key` folded to lower case.
fn cmp_lowercase(entry: &[u8], key: &[u8]) -> std::cmp::Ordering {
    entry
        .iter()
        .copied()
        .cmp(key.iter().map(|b| b.to_ascii_lowercase()))
}

/// `(fullname, arity)` of each subcommand of a container command.
type Subcommands = &'static [(&'static str, i32)];
/// `(name, arity, subcommands)`.
type CommandEntry = (&'static str, i32, Subcommands);

#[rustfmt::skip]
const SUB_ACL: &[(&str, i32)] = &[
    ("acl|cat", -2), ("acl|deluser", -3), ("acl|dryrun", -4), ("acl|genpass", -2),
    ("acl|getuser", 3), ("acl|help", 2), ("acl|list", 2), ("acl|load", 2), ("acl|log", -2),
    ("acl|save", 2), ("acl|setuser", -3), ("acl|users", 2), ("acl|whoami", 2),
];
#[rustfmt::skip]
const SUB_CLIENT: &[(&str, i32)] = &[
    ("client|caching", 3), ("client|getname", 2), ("client|getredir", 2), ("client|help", 2),
    ("client|id", 2), ("client|info", 2), ("client|kill", -3), ("client|list", -2),
    ("client|no-evict", 3), ("client|pause", -3), ("client|reply", 3), ("client|setname", 3),
    ("client|tracking", -3), ("client|trackinginfo", 2), ("client|unblock", -3),
    ("client|unpause", 2),
];
#[rustfmt::skip]
const SUB_CLUSTER: &[(&str, i32)] = &[
    ("cluster|addslots", -3), ("cluster|addslotsrange", -4), ("cluster|bumpepoch", 2),
    ("cluster|count-failure-reports", 3), ("cluster|countkeysinslot", 3),
    ("cluster|delslots", -3), ("cluster|delslotsrange", -4), ("cluster|failover", -2),
    ("cluster|flushslots", 2), ("cluster|forget", 3), ("cluster|getkeysinslot", 4),
    ("cluster|help", 2), ("cluster|info", 2), ("cluster|keyslot", 3), ("cluster|links", 2),
    ("cluster|meet", -4), ("cluster|myid", 2), ("cluster|nodes", 2), ("cluster|replicas", 3),
    ("cluster|replicate", 3), ("cluster|reset", -2), ("cluster|saveconfig", 2),
    ("cluster|set-config-epoch", 3), ("cluster|setslot", -4), ("cluster|shards", 2),
    ("cluster|slaves", 3), ("cluster|slots", 2),
];
#[rustfmt::skip]
const SUB_COMMAND: &[(&str, i32)] = &[
    ("command|count", 2), ("command|docs", -2), ("command|getkeys", -4),
    ("command|getkeysandflags", -4), ("command|help", 2), ("command|info", -2),
    ("command|list", -2),
];
#[rustfmt::skip]
const SUB_CONFIG: &[(&str, i32)] = &[
    ("config|get", -3), ("config|help", 2), ("config|resetstat", 2), ("config|rewrite", 2),
    ("config|set", -4),
];
#[rustfmt::skip]
const SUB_FUNCTION: &[(&str, i32)] = &[
    ("function|delete", 3), ("function|dump", 2), ("function|flush", -2), ("function|help", 2),
    ("function|kill", 2), ("function|list", -2), ("function|load", -3), ("function|restore", -3),
    ("function|stats", 2),
];
#[rustfmt::skip]
const SUB_LATENCY: &[(&str, i32)] = &[
    ("latency|doctor", 2), ("latency|graph", 3), ("latency|help", 2), ("latency|histogram", -2),
    ("latency|history", 3), ("latency|latest", 2), ("latency|reset", -2),
];
#[rustfmt::skip]
const SUB_MEMORY: &[(&str, i32)] = &[
    ("memory|doctor", 2), ("memory|help", 2), ("memory|malloc-stats", 2), ("memory|purge", 2),
    ("memory|stats", 2), ("memory|usage", -3),
];
#[rustfmt::skip]
const SUB_MODULE: &[(&str, i32)] = &[
    ("module|help", 2), ("module|list", 2), ("module|load", -3), ("module|loadex", -3),
    ("module|unload", 3),
];
#[rustfmt::skip]
const SUB_OBJECT: &[(&str, i32)] = &[
    ("object|encoding", 3), ("object|freq", 3), ("object|help", 2), ("object|idletime", 3),
    ("object|refcount", 3),
];
#[rustfmt::skip]
const SUB_PUBSUB: &[(&str, i32)] = &[
    ("pubsub|channels", -2), ("pubsub|help", 2), ("pubsub|numpat", 2), ("pubsub|numsub", -2),
    ("pubsub|shardchannels", -2), ("pubsub|shardnumsub", -2),
];
#[rustfmt::skip]
const SUB_SCRIPT: &[(&str, i32)] = &[
    ("script|debug", 3), ("script|exists", -3), ("script|flush", -2), ("script|help", 2),
    ("script|kill", 2), ("script|load", 3),
];
#[rustfmt::skip]
const SUB_SLOWLOG: &[(&str, i32)] = &[
    ("slowlog|get", -2), ("slowlog|help", 2), ("slowlog|len", 2), ("slowlog|reset", 2),
];
#[rustfmt::skip]
const SUB_XGROUP: &[(&str, i32)] = &[
    ("xgroup|create", -5), ("xgroup|createconsumer", 5), ("xgroup|delconsumer", 5),
    ("xgroup|destroy", 4), ("xgroup|help", 2), ("xgroup|setid", -5),
];
#[rustfmt::skip]
const SUB_XINFO: &[(&str, i32)] = &[
    ("xinfo|consumers", 4), ("xinfo|groups", 3), ("xinfo|help", 2), ("xinfo|stream", -3),
];
/// Redis 7.0.15's command table as reported by `COMMAND` on a stock server:
/// `(name, arity, subcommands)`, sorted by name; subcommands are
/// `(fullname, arity)` sorted by fullname. Arity follows Redis: `n > 0`
/// means exactly `n` arguments including the name, `-n` at least `n`.
#[rustfmt::skip]
const REDIS_COMMANDS: &[CommandEntry] = &[
    ("acl", -2, SUB_ACL), ("append", 3, &[]), ("asking", 1, &[]), ("auth", -2, &[]),
    ("bgrewriteaof", 1, &[]), ("bgsave", -1, &[]), ("bitcount", -2, &[]), ("bitfield", -2, &[]),
    ("bitfield_ro", -2, &[]), ("bitop", -4, &[]), ("bitpos", -3, &[]), ("blmove", 6, &[]),
    ("blmpop", -5, &[]), ("blpop", -3, &[]), ("brpop", -3, &[]), ("brpoplpush", 4, &[]),
    ("bzmpop", -5, &[]), ("bzpopmax", -3, &[]), ("bzpopmin", -3, &[]), ("client", -2, SUB_CLIENT),
    ("cluster", -2, SUB_CLUSTER), ("command", -1, SUB_COMMAND), ("config", -2, SUB_CONFIG),
    ("copy", -3, &[]), ("dbsize", 1, &[]), ("debug", -2, &[]), ("decr", 2, &[]),
    ("decrby", 3, &[]), ("del", -2, &[]), ("discard", 1, &[]), ("dump", 2, &[]), ("echo", 2, &[]),
    ("eval", -3, &[]), ("eval_ro", -3, &[]), ("evalsha", -3, &[]), ("evalsha_ro", -3, &[]),
    ("exec", 1, &[]), ("exists", -2, &[]), ("expire", -3, &[]), ("expireat", -3, &[]),
    ("expiretime", 2, &[]), ("failover", -1, &[]), ("fcall", -3, &[]), ("fcall_ro", -3, &[]),
    ("flushall", -1, &[]), ("flushdb", -1, &[]), ("function", -2, SUB_FUNCTION),
    ("geoadd", -5, &[]), ("geodist", -4, &[]), ("geohash", -2, &[]), ("geopos", -2, &[]),
    ("georadius", -6, &[]), ("georadius_ro", -6, &[]), ("georadiusbymember", -5, &[]),
    ("georadiusbymember_ro", -5, &[]), ("geosearch", -7, &[]), ("geosearchstore", -8, &[]),
    ("get", 2, &[]), ("getbit", 3, &[]), ("getdel", 2, &[]), ("getex", -2, &[]),
    ("getrange", 4, &[]), ("getset", 3, &[]), ("hdel", -3, &[]), ("hello", -1, &[]),
    ("hexists", 3, &[]), ("hget", 3, &[]), ("hgetall", 2, &[]), ("hincrby", 4, &[]),
    ("hincrbyfloat", 4, &[]), ("hkeys", 2, &[]), ("hlen", 2, &[]), ("hmget", -3, &[]),
    ("hmset", -4, &[]), ("hrandfield", -2, &[]), ("hscan", -3, &[]), ("hset", -4, &[]),
    ("hsetnx", 4, &[]), ("hstrlen", 3, &[]), ("hvals", 2, &[]), ("incr", 2, &[]),
    ("incrby", 3, &[]), ("incrbyfloat", 3, &[]), ("info", -1, &[]), ("keys", 2, &[]),
    ("lastsave", 1, &[]), ("latency", -2, SUB_LATENCY), ("lcs", -3, &[]), ("lindex", 3, &[]),
    ("linsert", 5, &[]), ("llen", 2, &[]), ("lmove", 5, &[]), ("lmpop", -4, &[]),
    ("lolwut", -1, &[]), ("lpop", -2, &[]), ("lpos", -3, &[]), ("lpush", -3, &[]),
    ("lpushx", -3, &[]), ("lrange", 4, &[]), ("lrem", 4, &[]), ("lset", 4, &[]),
    ("ltrim", 4, &[]), ("memory", -2, SUB_MEMORY), ("mget", -2, &[]), ("migrate", -6, &[]),
    ("module", -2, SUB_MODULE), ("monitor", 1, &[]), ("move", 3, &[]), ("mset", -3, &[]),
    ("msetnx", -3, &[]), ("multi", 1, &[]), ("object", -2, SUB_OBJECT), ("persist", 2, &[]),
    ("pexpire", -3, &[]), ("pexpireat", -3, &[]), ("pexpiretime", 2, &[]), ("pfadd", -2, &[]),
    ("pfcount", -2, &[]), ("pfdebug", 3, &[]), ("pfmerge", -2, &[]), ("pfselftest", 1, &[]),
    ("ping", -1, &[]), ("psetex", 4, &[]), ("psubscribe", -2, &[]), ("psync", -3, &[]),
    ("pttl", 2, &[]), ("publish", 3, &[]), ("pubsub", -2, SUB_PUBSUB), ("punsubscribe", -1, &[]),
    ("quit", -1, &[]), ("randomkey", 1, &[]), ("readonly", 1, &[]), ("readwrite", 1, &[]),
    ("rename", 3, &[]), ("renamenx", 3, &[]), ("replconf", -1, &[]), ("replicaof", 3, &[]),
    ("reset", 1, &[]), ("restore", -4, &[]), ("restore-asking", -4, &[]), ("role", 1, &[]),
    ("rpop", -2, &[]), ("rpoplpush", 3, &[]), ("rpush", -3, &[]), ("rpushx", -3, &[]),
    ("sadd", -3, &[]), ("save", 1, &[]), ("scan", -2, &[]), ("scard", 2, &[]),
    ("script", -2, SUB_SCRIPT), ("sdiff", -2, &[]), ("sdiffstore", -3, &[]), ("select", 2, &[]),
    ("set", -3, &[]), ("setbit", 4, &[]), ("setex", 4, &[]), ("setnx", 3, &[]),
    ("setrange", 4, &[]), ("shutdown", -1, &[]), ("sinter", -2, &[]), ("sintercard", -3, &[]),
    ("sinterstore", -3, &[]), ("sismember", 3, &[]), ("slaveof", 3, &[]),
    ("slowlog", -2, SUB_SLOWLOG), ("smembers", 2, &[]), ("smismember", -3, &[]),
    ("smove", 4, &[]), ("sort", -2, &[]), ("sort_ro", -2, &[]), ("spop", -2, &[]),
    ("spublish", 3, &[]), ("srandmember", -2, &[]), ("srem", -3, &[]), ("sscan", -3, &[]),
    ("ssubscribe", -2, &[]), ("strlen", 2, &[]), ("subscribe", -2, &[]), ("substr", 4, &[]),
    ("sunion", -2, &[]), ("sunionstore", -3, &[]), ("sunsubscribe", -1, &[]), ("swapdb", 3, &[]),
    ("sync", 1, &[]), ("time", 1, &[]), ("touch", -2, &[]), ("ttl", 2, &[]), ("type", 2, &[]),
    ("unlink", -2, &[]), ("unsubscribe", -1, &[]), ("unwatch", 1, &[]), ("wait", 3, &[]),
    ("watch", -2, &[]), ("xack", -4, &[]), ("xadd", -5, &[]), ("xautoclaim", -6, &[]),
    ("xclaim", -6, &[]), ("xdel", -3, &[]), ("xgroup", -2, SUB_XGROUP), ("xinfo", -2, SUB_XINFO),
    ("xlen", 2, &[]), ("xpending", -3, &[]), ("xrange", -4, &[]), ("xread", -4, &[]),
    ("xreadgroup", -7, &[]), ("xrevrange", -4, &[]), ("xsetid", -3, &[]), ("xtrim", -4, &[]),
    ("zadd", -4, &[]), ("zcard", 2, &[]), ("zcount", 4, &[]), ("zdiff", -3, &[]),
    ("zdiffstore", -4, &[]), ("zincrby", 4, &[]), ("zinter", -3, &[]), ("zintercard", -3, &[]),
    ("zinterstore", -4, &[]), ("zlexcount", 4, &[]), ("zmpop", -4, &[]), ("zmscore", -3, &[]),
    ("zpopmax", -2, &[]), ("zpopmin", -2, &[]), ("zrandmember", -2, &[]), ("zrange", -4, &[]),
    ("zrangebylex", -4, &[]), ("zrangebyscore", -4, &[]), ("zrangestore", -5, &[]),
    ("zrank", 3, &[]), ("zrem", -3, &[]), ("zremrangebylex", 4, &[]), ("zremrangebyrank", 4, &[]),
    ("zremrangebyscore", 4, &[]), ("zrevrange", -4, &[]), ("zrevrangebylex", -4, &[]),
    ("zrevrangebyscore", -4, &[]), ("zrevrank", 3, &[]), ("zscan", -3, &[]), ("zscore", 3, &[]),
    ("zunion", -3, &[]), ("zunionstore", -4, &[]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_verbs() {
        for (name, verb) in [
            (&b"subscribe"[..], Verb::Subscribe),
            (b"SUBSCRIBE", Verb::Subscribe),
            (b"UnSubscribe", Verb::Unsubscribe),
            (b"psubscribe", Verb::Psubscribe),
            (b"PUNSUBSCRIBE", Verb::Punsubscribe),
            (b"ping", Verb::Ping),
            (b"Quit", Verb::Quit),
            (b"RESET", Verb::Reset),
            (b"pong", Verb::Other),
            (b"ssubscribe", Verb::Other),
            (b"subscribex", Verb::Other),
            (b"", Verb::Other),
            (b"get", Verb::Other),
        ] {
            assert_eq!(classify(name), verb, "{name:?}");
        }
        assert!(eq_ignore_case(b"EURusd", b"eurUSD"));
        assert!(!eq_ignore_case(b"EURUSD", b"EURUSDX"));
        // Redis arities: subscribe -2, unsubscribe -1, ping -1 (max 2),
        // quit -1, reset 1.
        assert!(!Verb::Subscribe.accepts_arg_count(1));
        assert!(Verb::Subscribe.accepts_arg_count(3));
        assert!(Verb::Unsubscribe.accepts_arg_count(1));
        assert!(Verb::Ping.accepts_arg_count(2));
        assert!(!Verb::Ping.accepts_arg_count(3));
        assert!(Verb::Quit.accepts_arg_count(5));
        assert!(!Verb::Reset.accepts_arg_count(2));
        assert_eq!(Verb::Psubscribe.name(), Some("psubscribe"));
        assert_eq!(Verb::Other.name(), None);
    }

    #[test]
    fn command_table_is_sorted_and_consistent() {
        assert_eq!(REDIS_COMMANDS.len(), 240);
        for w in REDIS_COMMANDS.windows(2) {
            assert!(w[0].0 < w[1].0, "{} / {}", w[0].0, w[1].0);
        }
        let mut subs = 0;
        for &(name, _, sub) in REDIS_COMMANDS {
            assert_eq!(name, name.to_ascii_lowercase());
            for w in sub.windows(2) {
                assert!(w[0].0 < w[1].0);
            }
            for &(full, _) in sub {
                assert!(full.starts_with(name) && full.as_bytes()[name.len()] == b'|');
                subs += 1;
            }
        }
        assert_eq!(subs, 126);
        for verb in [
            Verb::Subscribe,
            Verb::Unsubscribe,
            Verb::Psubscribe,
            Verb::Punsubscribe,
            Verb::Ping,
            Verb::Quit,
            Verb::Reset,
        ] {
            assert!(is_known_redis_command(verb.name().unwrap().as_bytes()));
        }
    }

    #[test]
    fn checks_commands_like_redis() {
        use CommandCheck::*;
        assert_eq!(check_redis_command(b"foo", None, 1), Unknown);
        assert_eq!(
            check_redis_command(b"GeT", Some(b"k"), 2),
            Valid { fullname: "get" }
        );
        assert_eq!(
            check_redis_command(b"get", None, 1),
            WrongArity { fullname: "get" }
        );
        assert_eq!(
            check_redis_command(b"config", None, 1),
            WrongArity { fullname: "config" }
        );
        assert_eq!(
            check_redis_command(b"config", Some(b"foo"), 2),
            UnknownSubcommand
        );
        assert_eq!(
            check_redis_command(b"CONFIG", Some(b"GET"), 3),
            Valid {
                fullname: "config|get"
            }
        );
        assert_eq!(
            check_redis_command(b"memory", Some(b"usage"), 2),
            WrongArity {
                fullname: "memory|usage"
            }
        );
        // COMMAND (arity -1) is valid alone and a container with arguments.
        assert_eq!(
            check_redis_command(b"command", None, 1),
            Valid {
                fullname: "command"
            }
        );
        assert!(is_known_redis_command(b"restore-asking"));
        assert!(is_known_redis_command(b"GEORADIUS_RO"));
        assert!(!is_known_redis_command(b"get\0"));
    }
}
