//! The deck job's observe step: what agent-deck lists and shows, the panes, the hook status files,
//! and the observations the policies take.

use super::*;

impl<'a> Runtime<'a> {
    pub(super) fn problem(&self, report: &mut TickReport, text: String) {
        Line::warning("deck", report.now)
            .field("problem", &text)
            .emit();
        report.problems.push(text);
    }

    pub(super) fn audit(&self, report: &mut TickReport, file: &str, record: &Value) {
        if self.dry_run {
            return;
        }
        let dir = self.root.join("watchdog");
        let written = std::fs::create_dir_all(&dir).and_then(|()| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(file))?;
            f.write_all(format!("{record}\n").as_bytes())
        });
        if let Err(e) = written {
            self.problem(
                report,
                format!("audit write failed {}: {e}", dir.join(file).display()),
            );
        }
    }

    pub(super) fn opt_in(&self, id: &str) -> bool {
        safe_file_name(id) && self.root.join("watchdog/autorestart").join(id).is_file()
    }

    pub(super) fn socket_of(&self, info: &SessionInfo) -> Socket {
        info.tmux_socket
            .as_deref()
            .map(Socket::parse)
            .unwrap_or_else(|| self.default_socket.clone())
    }

    pub(super) fn capture(&self, info: &SessionInfo) -> Result<String, String> {
        let name = info
            .tmux_session
            .as_deref()
            .ok_or("agent-deck names no tmux_session for it")?;
        self.tmux
            .capture_pane(&self.socket_of(info), name)
            .map_err(|e| e.to_string())
    }

    /// `session show`, merged over what the listing said.
    pub(super) fn show(
        &self,
        listed: &SessionInfo,
        profile: Option<&str>,
    ) -> (SessionInfo, String) {
        match self.deck.show(&listed.id, profile) {
            Ok(Shown::Found(detail)) => {
                let mut detail = *detail;
                detail.id.clone_from(&listed.id);
                if detail.title.is_empty() {
                    detail.title.clone_from(&listed.title);
                }
                for (mine, theirs) in [
                    (&mut detail.group, &listed.group),
                    (&mut detail.profile, &listed.profile),
                    (&mut detail.parent_session_id, &listed.parent_session_id),
                    (&mut detail.tmux_session, &listed.tmux_session),
                    (&mut detail.tmux_socket, &listed.tmux_socket),
                    (&mut detail.env_file, &listed.env_file),
                ] {
                    if mine.is_none() {
                        mine.clone_from(theirs);
                    }
                }
                if detail.channels.is_empty() {
                    detail.channels.clone_from(&listed.channels);
                }
                detail.is_conductor |= listed.is_conductor;
                (detail, "found".to_owned())
            }
            Ok(Shown::NotFound(why)) => (unread(listed), format!("not found: {why}")),
            Ok(Shown::Empty(why)) => (unread(listed), format!("no answer: {why}")),
            Err(e) => (unread(listed), format!("failed: {e}")),
        }
    }

    /// The state dir a Telegram conductor's poller must own.
    pub(super) fn expected_state_dir(&self, info: &SessionInfo) -> Result<String, String> {
        let env_file = match &info.env_file {
            Some(file) => file.clone(),
            None => {
                let text = std::fs::read_to_string(&self.agent_deck_config).map_err(|e| {
                    format!(
                        "no env_file: {} unreadable ({e})",
                        self.agent_deck_config.display()
                    )
                })?;
                let name = pollers::conductor_name(&info.title);
                pollers::conductor_env_file(&text, name).ok_or_else(|| {
                    format!(
                        "no [conductors.{name}.claude] env_file in {}",
                        self.agent_deck_config.display()
                    )
                })?
            }
        };
        let path = pollers::expand_home(&env_file, self.home.as_deref());
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("env file {} unreadable ({e})", path.display()))?;
        pollers::state_dir_from_env_file(&text, self.home.as_deref())
            .ok_or_else(|| format!("env file {} sets no TELEGRAM_STATE_DIR", path.display()))
    }

    /// Live pollers owning a Telegram conductor's state dir; `None` when not applicable or unknown.
    pub(super) fn pollers_of(
        &self,
        obs: &SessionObservation,
        info: &SessionInfo,
        scan: &mut Option<Vec<pollers::Poller>>,
        report: &mut TickReport,
    ) -> Option<u32> {
        if !(obs.is_a_conductor() && obs.has_telegram() && obs.status.is_alive()) {
            return None;
        }
        let dir = match self.expected_state_dir(info) {
            Ok(dir) => dir,
            Err(why) => {
                if self.verbose {
                    Line::info("deck", report.now)
                        .field("session", &info.id)
                        .field("poller", "unknown")
                        .field("reason", &why)
                        .emit();
                }
                return None;
            }
        };
        let found = scan.get_or_insert_with(pollers::scan_system);
        let owners = pollers::owning(found, &dir);
        if owners > 1 {
            Line::warning("deck", report.now)
                .field("session", &info.id)
                .field("poller", "duplicate")
                .field("owners", owners)
                .field("state_dir", &dir)
                .field("reason", "two pollers on one bot answer 409 to each other")
                .emit();
        }
        Some(u32::try_from(owners).unwrap_or(u32::MAX))
    }

    pub(super) fn observation(&self, info: &SessionInfo) -> SessionObservation {
        SessionObservation {
            id: info.id.clone(),
            title: info.title.clone(),
            group: info.group.clone(),
            is_conductor: info.is_conductor,
            opt_in: self.opt_in(&info.id),
            status: SessionStatus::parse(info.status.as_deref()),
            auth_hold: info.auth_hold.as_ref().map(|h| AuthHold {
                reason: h.reason.clone(),
            }),
            channels: info.channels.clone(),
            pollers: None,
            last_output: None,
        }
    }

    /// `agent-deck list`, its note and skipped entries in the report; `None` when it failed
    /// (the report says so).
    pub(super) fn listing(&self, report: &mut TickReport) -> Option<Listing> {
        let listing = match self.deck.list_all() {
            Ok(listing) => listing,
            Err(e) => {
                report.list_failed = true;
                report.listing = format!("failed: {e}");
                self.problem(report, format!("agent-deck list: {e}"));
                return None;
            }
        };
        report.listing = listing.note.clone().unwrap_or_else(|| "ok".to_owned());
        if listing.skipped_entries > 0 {
            self.problem(
                report,
                format!(
                    "agent-deck list: {} entr(y/ies) without an id skipped",
                    listing.skipped_entries
                ),
            );
        }
        Some(listing)
    }

    /// What the tick sees of each listed session of the watched profile whose id is usable.
    pub(super) fn observe(&self, listing: &Listing, report: &mut TickReport) -> Vec<Watched> {
        let mut scan = None;
        let mut watched = Vec::new();
        for listed in &listing.sessions {
            if let Some(want) = &self.profile
                && listed.profile.as_deref().is_some_and(|p| p != want)
            {
                continue;
            }
            if let Err(e) = agentwatch_agentdeck::cli::check_argument("session id", &listed.id) {
                self.problem(report, format!("session skipped: {e}"));
                continue;
            }
            watched.push(self.watch(listed, &mut scan, report));
        }
        watched
    }

    /// What the restart guard sees of a watched session: its status and its pollers.
    pub(super) fn guard_observation(&self, w: &Watched) -> SessionObservation {
        let mut obs = self.observation(&w.info);
        obs.pollers = w.pollers;
        obs
    }

    /// The hook status directory to watch, if one exists.
    pub(super) fn hooks_dir(&self) -> Option<PathBuf> {
        let candidates: Vec<PathBuf> = match &self.config.deck.hooks_dir {
            Some(dir) => vec![config::expand_home(dir, self.env)],
            None => {
                let data = (self.env)("XDG_DATA_HOME")
                    .map(PathBuf::from)
                    .or_else(|| self.home.as_ref().map(|h| h.join(".local/share")));
                data.map(|d| d.join("agent-deck/hooks"))
                    .into_iter()
                    .chain([self.root.join("hooks")])
                    .collect()
            }
        };
        candidates.into_iter().find(|d| d.is_dir())
    }
}
