//! The ruleset's text commands: a line of `ipfw`'s words ([`Ruleset::execute`]) or
//! a whole file ([`Ruleset::load`]) run as the methods of [`Ruleset`] would, the
//! `table` and dummynet (`pipe`, `queue`, `sched`) commands among them.

use super::*;

impl Ruleset {
    /// Runs one command line (`add ...`, `delete 100`, `table T add ...`; an optional
    /// leading `ipfw` is skipped); `line` is its line number for errors. Returns what
    /// `ipfw` would print.
    /// `counters` are what `show` and `zero` read, as in [`show`](Self::show).
    pub fn execute<C: CounterSource + ?Sized>(
        &mut self,
        text: &str,
        line: usize,
        counters: &[&C],
    ) -> Result<String, CmdError> {
        let mut p = Parser::new(text, line);
        p.eat("ipfw");
        if p.at_end() {
            return Ok(String::new());
        }
        // A failure without a place of its own is about the command's first
        // argument.
        let arg_col = p.col_of(p.pos + 1);
        let at = |e: CmdError| place(e, line, arg_col);
        let cmd = p.next("a command")?;
        let out = match cmd {
            "add" => {
                let r = parse::rule(&mut p)?;
                p.end()?;
                let refs = std::mem::take(&mut p.refs);
                let n = self.add_at(r, line, &refs).map_err(at)?;
                self.list(Some(n))
            }
            "pipe" | "queue" | "sched" => {
                self.dummynet_cmd(parse::strip_comment(text), line)
                    .map_err(at)?;
                String::new()
            }
            "delete" => {
                if p.eat("set") {
                    let s: u8 = p.number("a set number")?;
                    p.end()?;
                    self.delete_set(s);
                } else {
                    let mut nums = vec![p.number::<u16>("a rule number")?];
                    while !p.at_end() {
                        nums.push(p.number("a rule number")?);
                    }
                    // All or none: every number must name a rule.
                    if let Some(i) = nums
                        .iter()
                        .position(|&n| !self.rules.iter().any(|(r, _)| r.num == n))
                    {
                        let col = p.col_of(p.pos - nums.len() + i);
                        return Err(failed_at(line, col, format!("rule {} not found", nums[i])));
                    }
                    for n in nums {
                        self.delete(n).map_err(at)?;
                    }
                }
                String::new()
            }
            "list" | "show" => {
                let num = if p.at_end() {
                    None
                } else {
                    Some(p.number::<u16>("a rule number")?)
                };
                p.end()?;
                if cmd == "list" {
                    self.list(num)
                } else {
                    self.show(num, counters)
                }
            }
            "zero" => {
                let num = if p.at_end() {
                    None
                } else {
                    Some(p.number::<u16>("a rule number")?)
                };
                p.end()?;
                self.zero(num, counters).map_err(at)?;
                String::new()
            }
            "flush" => {
                p.end()?;
                self.flush();
                String::new()
            }
            "set" => {
                let w = p.next("'enable', 'disable', 'move' or 'swap'")?;
                match w {
                    "enable" | "disable" => {
                        let mut sets = vec![p.number::<u8>("a set number (0-31)")?];
                        while !p.at_end() {
                            sets.push(p.number("a set number (0-31)")?);
                        }
                        for s in sets {
                            self.set_enable(s, w == "enable").map_err(at)?;
                        }
                    }
                    "move" => {
                        if p.eat("rule") {
                            let n: u16 = p.number("a rule number")?;
                            p.expect("to")?;
                            let s: u8 = p.number("a set number (0-31)")?;
                            p.end()?;
                            self.move_rule(n, s).map_err(at)?;
                        } else {
                            let a: u8 = p.number("a set number (0-31) or 'rule'")?;
                            p.expect("to")?;
                            let b: u8 = p.number("a set number (0-31)")?;
                            p.end()?;
                            self.set_move(a, b).map_err(at)?;
                        }
                    }
                    "swap" => {
                        let a: u8 = p.number("a set number (0-31)")?;
                        let b: u8 = p.number("a set number (0-31)")?;
                        p.end()?;
                        self.set_swap(a, b).map_err(at)?;
                    }
                    _ => {
                        p.pos -= 1;
                        return p
                            .err("'enable', 'disable', 'move' or 'swap'")
                            .map_err(Into::into);
                    }
                }
                String::new()
            }
            "table" => self.table_cmd(&mut p).map_err(at)?,
            _ => {
                p.pos -= 1;
                return Err(p
                    .error(
                        "a command (add, delete, list, show, zero, flush, set, table, pipe, \
                         queue, sched)",
                    )
                    .into());
            }
        };
        Ok(out)
    }

    fn table_cmd(&mut self, p: &mut Parser<'_>) -> Result<String, CmdError> {
        let name = p.word("a table name", |w| {
            parse::valid_name(w).then(|| w.to_string())
        })?;
        let verb = p.next("'create', 'add', 'delete', 'list', 'flush' or 'destroy'")?;
        match verb {
            "create" => {
                let mut ttype = TableType::Addr;
                if p.eat("type") {
                    ttype = p.word(
                        "a table type (addr, addr:hash, iface, number, flow:FIELDS)",
                        |w| match w {
                            "addr" | "addr:radix" => Some(TableType::Addr),
                            "addr:hash" => Some(TableType::AddrHash),
                            "iface" => Some(TableType::Iface),
                            "number" => Some(TableType::Number),
                            _ => FlowFields::parse(w.strip_prefix("flow:")?).map(TableType::Flow),
                        },
                    )?;
                }
                p.end()?;
                self.table_create(&name, ttype)?;
            }
            "add" => {
                // FreeBSD's `table NAME add KEY [VALUE] [KEY [VALUE]]...`: the word
                // after a key is its value.
                let mut entries: Vec<(&str, usize, u32)> = Vec::new();
                loop {
                    let key_col = p.col_of(p.pos);
                    let key = p.next("a table key")?;
                    let value = if p.at_end() {
                        0
                    } else {
                        p.number("a value (0-2147483646)")?
                    };
                    entries.push((key, key_col, value));
                    if p.at_end() {
                        break;
                    }
                }
                self.table_mut(&name)?;
                // The table exists: what fails now is about a key.
                self.table_add_all(&name, &entries)
                    .map_err(|(e, col)| place(e, p.line, col))?;
            }
            "delete" => {
                let mut keys: Vec<(usize, &str)> = Vec::new();
                loop {
                    let col = p.col_of(p.pos);
                    keys.push((col, p.next("a table key")?));
                    if p.at_end() {
                        break;
                    }
                }
                self.table_mut(&name)?;
                self.table_delete_all(&name, &keys)
                    .map_err(|(e, col)| place(e, p.line, col))?;
            }
            "list" => {
                p.end()?;
                return self.table_list(&name);
            }
            "flush" => {
                p.end()?;
                self.table_flush(&name)?;
            }
            "destroy" => {
                p.end()?;
                self.table_destroy(&name)?;
            }
            _ => {
                p.pos -= 1;
                return Err(p
                    .error("'create', 'add', 'delete', 'list', 'flush' or 'destroy'")
                    .into());
            }
        }
        Ok(String::new())
    }

    /// dummynet's `pipe|queue|sched N config|delete ...` (`text` without its
    /// comment): parsed, checked, noted, and queued for [`take_dummynet`](Self::take_dummynet).
    fn dummynet_cmd(&mut self, text: &str, line: usize) -> Result<(), CmdError> {
        let cmd = dummynet::parse_config(text).map_err(|mut e| {
            e.line = line;
            CmdError::Parse(e)
        })?;
        let words = parse::tokenize(text);
        let skip = usize::from(words.first().is_some_and(|w| w.text == "ipfw"));
        // The column of the object's number, and of the word after `word`.
        let num_col = words.get(skip + 1).map_or(0, |w| w.col);
        let after = |word: &str| {
            words
                .iter()
                .skip(skip + 3)
                .position(|w| w.text == word)
                .and_then(|i| words.get(skip + 3 + i + 1))
                .map_or(num_col, |w| w.col)
        };
        dummynet::check_command(&cmd, &self.dn_limits).map_err(|e| failed_at(line, num_col, e))?;
        match &cmd {
            DnCommand::Pipe(n, _) => {
                self.pipes.insert(*n);
            }
            DnCommand::Queue(n, cfg) => {
                let what = Ref::Pipe(cfg.pipe);
                if let Err(Missing::Undefined(e)) = self.resolve(&what, None) {
                    let col = if words.iter().any(|w| w.text == "sched") {
                        after("sched")
                    } else {
                        after("pipe")
                    };
                    match &mut self.pending {
                        Some(p) => p.push(Pending {
                            line,
                            col,
                            what,
                            ttype: None,
                            owner: Owner::Queue(*n, cfg.pipe),
                        }),
                        None => return Err(failed_at(line, col, e)),
                    }
                }
                self.queues.insert(*n, cfg.pipe);
            }
            DnCommand::Sched(n, _) => {
                // The scheduler is the pipe's: it comes after the pipe, even in a file.
                if !self.pipes.contains(n) {
                    return Err(failed_at(
                        line,
                        num_col,
                        format!("pipe {n} is not configured (pipe {n} config ...)"),
                    ));
                }
            }
            DnCommand::DeletePipe(n) | DnCommand::DeleteQueue(n) => {
                let (what, kind, exists) = match cmd {
                    DnCommand::DeletePipe(_) => (Ref::Pipe(*n), "pipe", self.pipes.contains(n)),
                    _ => (Ref::Queue(*n), "queue", self.queues.contains_key(n)),
                };
                if !exists {
                    return Err(failed_at(
                        line,
                        num_col,
                        format!("{kind} {n} does not exist"),
                    ));
                }
                if let Some(user) = self.user_of(&what) {
                    return Err(failed_at(
                        line,
                        num_col,
                        format!("{kind} {n} is in use by {user}"),
                    ));
                }
                if kind == "pipe" {
                    self.pipes.remove(n);
                } else {
                    self.queues.remove(n);
                }
            }
        }
        self.dn_out.push(cmd);
        Ok(())
    }

    /// Runs a rules file: one command per line, `#` comments, blank lines. All or
    /// nothing: on an error the ruleset is left as it was. The pipes, queues and
    /// tables the file's rules and queues name are resolved once the whole file has
    /// run, so they may be defined after their use; the first one still undefined
    /// is the error. Returns the commands run.
    pub fn load(&mut self, text: &str) -> Result<usize, CmdError> {
        let mut work = self.clone();
        work.pending = Some(Vec::new());
        let mut n = 0;
        for (i, l) in text.lines().enumerate() {
            if parse::tokenize(l).is_empty() {
                continue;
            }
            work.execute::<crate::Counters>(l, i + 1, &[])?;
            n += 1;
        }
        let mut pending = work.pending.take().unwrap_or_default();
        pending.sort_by_key(|p| (p.line, p.col));
        for p in pending {
            let live = match p.owner {
                Owner::Rule(id) => work.rules.iter().any(|(_, x)| *x == id),
                Owner::Queue(q, pipe) => work.queues.get(&q) == Some(&pipe),
            };
            if live {
                if let Err(e) = work.resolve(&p.what, p.ttype) {
                    return Err(failed_at(p.line, p.col, e));
                }
            }
        }
        *self = work;
        Ok(n)
    }
}
