//! The registry: a global layer plus nested agent scopes holding tools, restrictions, guards and
//! presentation modes, and the hooks every call runs through. It owns visibility (what a scope
//! sees), the Code Mode collapse, and the parallel/exclusive classification.
//!
//! Architecture invariant: user callbacks (guards, classifiers, hooks) are never called while a
//! registry lock is held, so they may register or unregister freely.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

use futures::FutureExt;
use serde::Serialize;

use super::definition::ToolDefinition;
use super::error::{codes, RegistryError, ToolError};
use super::hooks::{
    ApprovalHook, ExecuteCall, ExecuteNext, HookSet, PostDecision, PostNext, PreDecision, PreNext,
};
use super::pipeline::{self, StagedCall, ToolCall, ToolExecutionInput};
use super::result::ToolExecutionResult;
use super::scope::{next_id, AgentScope};
use super::{ToolSchema, RUN_CODE_NAME};

/// How tools are presented to the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// Every visible tool as a function definition.
    #[default]
    Native,
    /// Only `run_code` plus a generated SDK; model-direct calls to other tools collapse.
    Code,
    /// Both forms, no collapse.
    Both,
}

impl fmt::Display for ToolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolMode::Native => "native",
            ToolMode::Code => "code",
            ToolMode::Both => "both",
        })
    }
}

/// How a pending call may be scheduled next to its siblings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutionMode {
    /// May overlap other parallel calls (the tool classified these arguments as concurrency-safe).
    Parallel,
    /// Runs alone: it starts only when no other call is running.
    Exclusive,
}

/// A mask over the tools a scope inherits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restriction {
    /// Keep only these inherited tools (names registered later are excluded).
    pub allow: Option<Vec<String>>,
    /// Remove these inherited tools (names registered later are admitted).
    pub deny: Option<Vec<String>>,
}

type GuardFn = dyn Fn(&ToolCall) -> Option<String> + Send + Sync;

struct CompiledRestriction {
    allow: Option<HashSet<String>>,
    deny: Option<HashSet<String>>,
}

#[derive(Default)]
struct Layer {
    tools: Vec<(u64, Arc<ToolDefinition>)>,
    restrictions: Vec<(u64, CompiledRestriction)>,
    guards: Vec<(u64, Arc<GuardFn>)>,
    mode: Option<(u64, ToolMode)>,
}

impl Layer {
    fn find(&self, name: &str) -> Option<&Arc<ToolDefinition>> {
        self.tools.iter().map(|(_, d)| d).find(|d| d.name == name)
    }

    fn admits(&self, name: &str) -> bool {
        self.restrictions.iter().all(|(_, r)| {
            r.allow.as_ref().is_none_or(|a| a.contains(name))
                && r.deny.as_ref().is_none_or(|d| !d.contains(name))
        })
    }

    fn is_empty(&self) -> bool {
        self.tools.is_empty()
            && self.restrictions.is_empty()
            && self.guards.is_empty()
            && self.mode.is_none()
    }
}

#[derive(Default)]
struct State {
    global: Layer,
    scoped: HashMap<u64, Layer>,
    code_transport: Option<(u64, Arc<ToolDefinition>)>,
}

impl State {
    fn layer_mut(&mut self, scope: Option<u64>) -> &mut Layer {
        match scope {
            None => &mut self.global,
            Some(id) => self.scoped.entry(id).or_default(),
        }
    }

    /// The scope chain's layers, farthest ancestor first.
    fn chain<'a>(
        &'a self,
        scope: Option<&'a AgentScope>,
    ) -> impl DoubleEndedIterator<Item = &'a Layer> + 'a {
        scope
            .map(AgentScope::chain)
            .unwrap_or_default()
            .iter()
            .filter_map(|id| self.scoped.get(id))
    }

    fn mode_for(&self, scope: Option<&AgentScope>, default: ToolMode) -> ToolMode {
        self.chain(scope)
            .rev()
            .find_map(|layer| layer.mode.map(|(_, m)| m))
            .unwrap_or(default)
    }

    /// The definition `scope` sees under `name` (shadowing and restrictions applied).
    fn resolve(
        &self,
        name: &str,
        scope: Option<&AgentScope>,
        default: ToolMode,
    ) -> Option<Arc<ToolDefinition>> {
        if name == RUN_CODE_NAME {
            if self.mode_for(scope, default) == ToolMode::Native {
                return None;
            }
            return self.code_transport.as_ref().map(|(_, d)| d.clone());
        }
        let own = scope.and_then(|s| self.scoped.get(&s.id()));
        if let Some(found) = own.and_then(|layer| layer.find(name)) {
            return Some(found.clone());
        }
        let ancestors = scope.map(|s| s.chain()).unwrap_or_default();
        let ancestors = &ancestors[..ancestors.len().saturating_sub(1)];
        let inherited = ancestors
            .iter()
            .rev()
            .filter_map(|id| self.scoped.get(id))
            .find_map(|layer| layer.find(name))
            .or_else(|| self.global.find(name))?;
        self.chain(scope)
            .all(|layer| layer.admits(name))
            .then(|| inherited.clone())
    }

    /// Names inherited by `scope` (global plus ancestors), before restrictions.
    fn inherited(&self, scope: Option<&AgentScope>) -> Vec<Arc<ToolDefinition>> {
        let mut ordered: Vec<Arc<ToolDefinition>> =
            self.global.tools.iter().map(|(_, d)| d.clone()).collect();
        let ancestors = scope.map(|s| s.chain()).unwrap_or_default();
        let ancestors = &ancestors[..ancestors.len().saturating_sub(1)];
        for layer in ancestors.iter().filter_map(|id| self.scoped.get(id)) {
            for (_, definition) in &layer.tools {
                upsert(&mut ordered, definition.clone());
            }
        }
        ordered
    }

    /// Everything `scope` sees, in map insertion order (a shadowing entry keeps its slot).
    fn view(&self, scope: Option<&AgentScope>, default: ToolMode) -> Vec<Arc<ToolDefinition>> {
        let mut visible: Vec<Arc<ToolDefinition>> = self
            .inherited(scope)
            .into_iter()
            .filter(|d| self.chain(scope).all(|layer| layer.admits(&d.name)))
            .collect();
        if let Some(own) = scope.and_then(|s| self.scoped.get(&s.id())) {
            for (_, definition) in &own.tools {
                upsert(&mut visible, definition.clone());
            }
        }
        if self.mode_for(scope, default) != ToolMode::Native {
            if let Some((_, transport)) = &self.code_transport {
                visible.push(transport.clone());
            }
        }
        visible
    }
}

fn upsert(ordered: &mut Vec<Arc<ToolDefinition>>, definition: Arc<ToolDefinition>) {
    match ordered.iter_mut().find(|d| d.name == definition.name) {
        Some(slot) => *slot = definition,
        None => ordered.push(definition),
    }
}

pub(crate) struct Inner {
    state: RwLock<State>,
    hooks: RwLock<Arc<HookSet>>,
    default_mode: ToolMode,
    /// Approval answers scoped to a run or a session, whichever channel gave them.
    approvals: super::approvals::Answers,
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    // Writers only push/retain; a panic mid-write cannot leave a half-updated entry.
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The tool registry. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Registry {
    pub(crate) inner: Arc<Inner>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("default_mode", &self.inner.default_mode)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy)]
enum Target {
    Tool(Option<u64>, u64),
    Restriction(u64, u64),
    Guard(Option<u64>, u64),
    Mode(u64, u64),
    Hook(u64),
    Transport(u64),
}

/// Undoes a registration when dropped (or explicitly with [`RegistrationGuard::release`]);
/// [`RegistrationGuard::keep`] makes it permanent.
#[must_use = "dropping the guard unregisters at once"]
pub struct RegistrationGuard {
    registry: Weak<Inner>,
    targets: Vec<Target>,
}

impl fmt::Debug for RegistrationGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrationGuard")
            .field("registrations", &self.targets.len())
            .finish()
    }
}

impl RegistrationGuard {
    fn new(registry: &Registry, target: Target) -> Self {
        Self {
            registry: Arc::downgrade(&registry.inner),
            targets: vec![target],
        }
    }

    /// Combines guards so one drop undoes all of them.
    pub fn merge(mut self, mut other: RegistrationGuard) -> Self {
        self.targets.append(&mut other.targets);
        self
    }

    /// Keeps the registration for the registry's lifetime.
    pub fn keep(mut self) {
        self.targets.clear();
    }

    /// Unregisters now.
    pub fn release(self) {}
}

/// The Code Mode collapse: under `Code`, a model-direct call to anything but `run_code` is
/// refused as an unknown tool; calls from inside a program are not.
fn collapses(mode: ToolMode, name: &str, nested: bool) -> bool {
    !nested && name != RUN_CODE_NAME && mode == ToolMode::Code
}

/// Moves the entries registered under `id` out of `entries`.
pub(crate) fn take_entries<T>(entries: &mut Vec<(u64, T)>, id: u64) -> Vec<(u64, T)> {
    let (taken, kept) = std::mem::take(entries)
        .into_iter()
        .partition(|(i, _)| *i == id);
    *entries = kept;
    taken
}

/// What an unregistration removed. Dropped only after the registry's locks are released: a
/// removed callback may own a guard whose own drop needs those locks.
#[derive(Default)]
struct Removed {
    tools: Vec<(u64, Arc<ToolDefinition>)>,
    guards: Vec<(u64, Arc<GuardFn>)>,
    restrictions: Vec<(u64, CompiledRestriction)>,
    transport: Option<(u64, Arc<ToolDefinition>)>,
    hooks: Option<(Arc<HookSet>, HookSet)>,
    layer: Option<Layer>,
}

impl Drop for RegistrationGuard {
    fn drop(&mut self) {
        let Some(inner) = self.registry.upgrade() else {
            return;
        };
        let mut removed = Vec::new();
        for target in self.targets.drain(..) {
            let mut out = Removed::default();
            if let Target::Hook(id) = target {
                let mut hooks = write(&inner.hooks);
                let mut updated = (**hooks).clone();
                let taken = updated.take(id);
                let previous = std::mem::replace(&mut *hooks, Arc::new(updated));
                drop(hooks);
                out.hooks = Some((previous, taken));
                removed.push(out);
                continue;
            }
            let mut state = write(&inner.state);
            let scope = match target {
                Target::Tool(scope, id) | Target::Guard(scope, id) => {
                    let layer = state.layer_mut(scope);
                    out.tools = take_entries(&mut layer.tools, id);
                    out.guards = take_entries(&mut layer.guards, id);
                    scope
                }
                Target::Restriction(scope, id) | Target::Mode(scope, id) => {
                    let layer = state.layer_mut(Some(scope));
                    out.restrictions = take_entries(&mut layer.restrictions, id);
                    if layer.mode.is_some_and(|(i, _)| i == id) {
                        layer.mode = None;
                    }
                    Some(scope)
                }
                Target::Transport(id) => {
                    if state.code_transport.as_ref().is_some_and(|(i, _)| *i == id) {
                        out.transport = state.code_transport.take();
                    }
                    None
                }
                Target::Hook(_) => None,
            };
            // Forget empty scope layers so finished agents leave nothing behind.
            if let Some(scope) = scope {
                if state.scoped.get(&scope).is_some_and(Layer::is_empty) {
                    out.layer = state.scoped.remove(&scope);
                }
            }
            drop(state);
            removed.push(out);
        }
        drop(removed);
    }
}

/// A registry handle that does not keep it alive: what the registry's own tools (the `run_code`
/// transport) hold, so that a registry and its transport do not own each other.
#[derive(Clone)]
pub(crate) struct WeakRegistry(Weak<Inner>);

impl WeakRegistry {
    pub(crate) fn upgrade(&self) -> Option<Registry> {
        self.0.upgrade().map(|inner| Registry { inner })
    }
}

impl Registry {
    pub(crate) fn downgrade(&self) -> WeakRegistry {
        WeakRegistry(Arc::downgrade(&self.inner))
    }

    /// A registry whose deployment mode is `native`.
    pub fn new() -> Self {
        Self::with_mode(ToolMode::Native)
    }

    /// A registry with the given deployment mode (agents may override it with `present_as`).
    pub fn with_mode(default_mode: ToolMode) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: RwLock::new(State::default()),
                hooks: RwLock::new(Arc::new(HookSet::default())),
                default_mode,
                approvals: super::approvals::Answers::default(),
            }),
        }
    }

    /// Registers globally (`scope: None`) or for an agent scope, where it shadows inherited
    /// tools of the same name and is exempt from that scope's restrictions.
    pub fn register(
        &self,
        definition: ToolDefinition,
        scope: Option<&AgentScope>,
    ) -> Result<RegistrationGuard, RegistryError> {
        let name = definition.name.clone();
        if definition.output.is_none() {
            return Err(RegistryError::new(format!(
                "tool \"{name}\" must declare output {{ schema, render, presentationMeta? }}"
            )));
        }
        if definition.execute.is_none() {
            return Err(RegistryError::new(format!(
                "tool \"{name}\" must declare execute"
            )));
        }
        if definition.timeout.is_some_and(|t| t.is_zero()) {
            return Err(RegistryError::new(format!(
                "tool \"{name}\" timeoutMs must be a positive finite number"
            )));
        }
        if name == RUN_CODE_NAME {
            return Err(RegistryError::new(format!(
                "tool name \"{RUN_CODE_NAME}\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
            )));
        }
        let scope_id = scope.map(AgentScope::id);
        let id = next_id();
        let mut state = write(&self.inner.state);
        let layer = state.layer_mut(scope_id);
        if layer.find(&name).is_some() {
            let message = match scope_id {
                None => format!("tool \"{name}\" is already registered (for a per-agent variant, register through that agent's `agent.ctx` instead)"),
                Some(_) => format!("tool \"{name}\" is already registered in this scope"),
            };
            return Err(RegistryError::new(message));
        }
        layer.tools.push((id, Arc::new(definition)));
        drop(state);
        Ok(RegistrationGuard::new(self, Target::Tool(scope_id, id)))
    }

    /// Registers every definition, or none: on the first refusal the ones already registered
    /// are removed again and the refusal is returned.
    pub fn register_all(
        &self,
        definitions: impl IntoIterator<Item = ToolDefinition>,
        scope: Option<&AgentScope>,
    ) -> Result<RegistrationGuard, RegistryError> {
        let mut all = RegistrationGuard {
            registry: Arc::downgrade(&self.inner),
            targets: Vec::new(),
        };
        for definition in definitions {
            all = all.merge(self.register(definition, scope)?);
        }
        Ok(all)
    }

    /// Installs the `run_code` transport (the only way that name enters a view). Visible to
    /// scopes whose mode is not native, appended after every other tool.
    pub fn set_code_transport(&self, definition: ToolDefinition) -> RegistrationGuard {
        let id = next_id();
        write(&self.inner.state).code_transport = Some((id, Arc::new(definition)));
        RegistrationGuard::new(self, Target::Transport(id))
    }

    /// The installed `run_code` transport, whatever the mode.
    pub(crate) fn code_transport(&self) -> Option<Arc<ToolDefinition>> {
        read(&self.inner.state)
            .code_transport
            .as_ref()
            .map(|(_, definition)| definition.clone())
    }

    /// Masks the tools `scope` (and everything nested in it) inherits. Masks intersect; the
    /// scope's own registrations are exempt.
    pub fn restrict(
        &self,
        scope: &AgentScope,
        restriction: Restriction,
    ) -> Result<RegistrationGuard, RegistryError> {
        let Restriction { allow, deny } = restriction;
        if allow.is_none() && deny.is_none() {
            return Err(RegistryError::new(
                "tools.restrict({}) is a no-op: pass `allow` and/or `deny` (an empty filter is almost always a materialized-empty-config bug)",
            ));
        }
        let named: Vec<&String> = allow
            .iter()
            .flatten()
            .chain(deny.iter().flatten())
            .collect();
        if named.iter().any(|n| *n == RUN_CODE_NAME) {
            return Err(RegistryError::new(format!(
                "tools.restrict() cannot name reserved Code Mode presentation transport \"{RUN_CODE_NAME}\"; restrict end-capability tools instead"
            )));
        }
        let mut state = write(&self.inner.state);
        let known: HashSet<String> = state
            .inherited(Some(scope))
            .iter()
            .map(|d| d.name.clone())
            .collect();
        let unknown: Vec<&String> = named
            .iter()
            .copied()
            .filter(|n| !known.contains(*n))
            .collect();
        if !unknown.is_empty() {
            let mut sorted: Vec<&String> = known.iter().collect();
            sorted.sort_by(|a, b| crate::json::cmp_utf16(a, b));
            let listed = sorted
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            let quoted = unknown
                .iter()
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(RegistryError::new(format!(
                "tools.restrict() names unknown global tool{} {quoted}; known global tools: {}",
                if unknown.len() > 1 { "s" } else { "" },
                if listed.is_empty() { "(none)" } else { &listed }
            )));
        }
        let compiled = CompiledRestriction {
            allow: allow.map(|a| a.into_iter().collect()),
            deny: deny.map(|d| d.into_iter().collect()),
        };
        let id = next_id();
        state
            .layer_mut(Some(scope.id()))
            .restrictions
            .push((id, compiled));
        drop(state);
        Ok(RegistrationGuard::new(
            self,
            Target::Restriction(scope.id(), id),
        ))
    }

    /// Declares how `scope` (and its descendants, unless they declare their own) presents
    /// tools. Once per scope.
    pub fn present_as(
        &self,
        scope: &AgentScope,
        mode: ToolMode,
    ) -> Result<RegistrationGuard, RegistryError> {
        let mut state = write(&self.inner.state);
        let layer = state.layer_mut(Some(scope.id()));
        if let Some((_, existing)) = layer.mode {
            return Err(RegistryError::new(format!(
                "tools.presentAs(\"{mode}\") conflicts with \"{existing}\" already declared for this scope; one composition selects one presentation"
            )));
        }
        let id = next_id();
        layer.mode = Some((id, mode));
        drop(state);
        Ok(RegistrationGuard::new(self, Target::Mode(scope.id(), id)))
    }

    /// Adds a synchronous, monotonic guard: returning a reason denies the call; no guard can
    /// turn a denial into an allow. Global guards run first, then the scope chain from farthest
    /// to nearest.
    pub fn guard<F>(&self, scope: Option<&AgentScope>, guard: F) -> RegistrationGuard
    where
        F: Fn(&ToolCall) -> Option<String> + Send + Sync + 'static,
    {
        let scope_id = scope.map(AgentScope::id);
        let id = next_id();
        write(&self.inner.state)
            .layer_mut(scope_id)
            .guards
            .push((id, Arc::new(guard)));
        RegistrationGuard::new(self, Target::Guard(scope_id, id))
    }

    /// The definition `scope` sees under `name` (`None` for the global view).
    pub fn get(&self, name: &str, scope: Option<&AgentScope>) -> Option<Arc<ToolDefinition>> {
        read(&self.inner.state).resolve(name, scope, self.inner.default_mode)
    }

    /// The model-facing schemas `scope` sees, in registration order: name, description and
    /// parameters (the wire listing; the SDK's projection with output schemas is
    /// `run_code::prompt::sdk_tools`).
    pub fn schemas(&self, scope: Option<&AgentScope>) -> Vec<ToolSchema> {
        let view = read(&self.inner.state).view(scope, self.inner.default_mode);
        view.iter().map(|d| d.schema(false)).collect()
    }

    /// The definitions `scope` sees, in the same order as [`Registry::schemas`].
    pub fn definitions(&self, scope: Option<&AgentScope>) -> Vec<Arc<ToolDefinition>> {
        read(&self.inner.state).view(scope, self.inner.default_mode)
    }

    /// The presentation mode in force for `scope`: the nearest declaration, else the default.
    pub fn mode_for(&self, scope: Option<&AgentScope>) -> ToolMode {
        read(&self.inner.state).mode_for(scope, self.inner.default_mode)
    }

    /// Whether a model-direct call to `name` collapses to `UNKNOWN_TOOL` under Code Mode.
    pub fn collapses(&self, name: &str, scope: Option<&AgentScope>, nested: bool) -> bool {
        collapses(self.mode_for(scope), name, nested)
    }

    /// The definition `scope` sees for `name`, and whether a call to it collapses; one look at
    /// the registry for both.
    pub(crate) fn resolve_with_collapse(
        &self,
        name: &str,
        scope: Option<&AgentScope>,
        nested: bool,
    ) -> (Option<Arc<ToolDefinition>>, bool) {
        let state = read(&self.inner.state);
        let definition = state.resolve(name, scope, self.inner.default_mode);
        let mode = state.mode_for(scope, self.inner.default_mode);
        (definition, collapses(mode, name, nested))
    }

    /// The definition that may execute for a call (the collapse applied).
    pub(crate) fn resolve_execution(
        &self,
        name: &str,
        scope: Option<&AgentScope>,
        nested: bool,
    ) -> Option<Arc<ToolDefinition>> {
        match self.resolve_with_collapse(name, scope, nested) {
            (definition, false) => definition,
            (_, true) => None,
        }
    }

    /// `Parallel` only when the visible, non-collapsed definition's classifier returns `true`.
    pub fn execution_mode(&self, input: &ToolExecutionInput) -> ExecutionMode {
        match self.resolve_execution(&input.name, input.agent.as_ref(), input.parent.is_some()) {
            Some(definition) if definition.is_concurrency_safe(&input.arguments) => {
                ExecutionMode::Parallel
            }
            _ => ExecutionMode::Exclusive,
        }
    }

    /// The first guard denial for `call`: global guards, then the chain farthest first.
    pub(crate) fn guard_reason(&self, call: &ToolCall) -> Result<Option<String>, ToolError> {
        let guards: Vec<Arc<GuardFn>> = {
            let state = read(&self.inner.state);
            let global = state.global.guards.iter();
            let chained = match call.agent() {
                Some(agent) => state
                    .chain(Some(agent))
                    .flat_map(|l| l.guards.iter())
                    .collect(),
                None => Vec::new(),
            };
            global.chain(chained).map(|(_, g)| g.clone()).collect()
        };
        for guard in guards {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guard(call))) {
                Ok(Some(reason)) => return Ok(Some(reason)),
                Ok(None) => {}
                Err(payload) => {
                    let message = super::hooks::panic_message(&*payload);
                    return Err(ToolError::new(format!("guard panicked: {message}")));
                }
            }
        }
        Ok(None)
    }

    pub(crate) fn hooks(&self) -> Arc<HookSet> {
        read(&self.inner.hooks).clone()
    }

    /// Adds hooks atomically (a scoped hook is never visible unscoped, even for a moment).
    fn add_hook(
        &self,
        scope: Option<&AgentScope>,
        add: impl FnOnce(&mut HookSet, u64),
    ) -> RegistrationGuard {
        let id = next_id();
        let mut hooks = write(&self.inner.hooks);
        let mut updated = (**hooks).clone();
        add(&mut updated, id);
        if let Some(scope) = scope {
            updated.scopes.insert(id, scope.id());
        }
        *hooks = Arc::new(updated);
        drop(hooks);
        RegistrationGuard::new(self, Target::Hook(id))
    }

    /// [`Registry::on_pre_execute`] for the calls of one agent scope (and its nested agents).
    pub fn on_pre_execute_in<F, Fut>(&self, scope: &AgentScope, hook: F) -> RegistrationGuard
    where
        F: Fn(Arc<ToolCall>, PreNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PreDecision, ToolError>> + Send + 'static,
    {
        self.add_pre(Some(scope), hook)
    }

    /// [`Registry::on_execute`] for the calls of one agent scope (and its nested agents).
    pub fn on_execute_in<F, Fut>(&self, scope: &AgentScope, wrapper: F) -> RegistrationGuard
    where
        F: Fn(ExecuteCall, ExecuteNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolExecutionResult, ToolError>> + Send + 'static,
    {
        self.add_execute(Some(scope), wrapper)
    }

    /// [`Registry::on_post_execute`] for the calls of one agent scope (and its nested agents).
    pub fn on_post_execute_in<F, Fut>(&self, scope: &AgentScope, hook: F) -> RegistrationGuard
    where
        F: Fn(Arc<ToolCall>, Arc<ToolExecutionResult>, PostNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PostDecision, ToolError>> + Send + 'static,
    {
        self.add_post(Some(scope), hook)
    }

    /// [`Registry::on_result`] for the calls of one agent scope (and its nested agents).
    pub fn on_result_in<F>(&self, scope: &AgentScope, observer: F) -> RegistrationGuard
    where
        F: Fn(&ToolCall, &Arc<ToolExecutionResult>) -> Result<(), ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.add_result(Some(scope), observer)
    }

    /// Adds a pre-execute hook. Call `next.run()` to delegate; return a decision to decide.
    pub fn on_pre_execute<F, Fut>(&self, hook: F) -> RegistrationGuard
    where
        F: Fn(Arc<ToolCall>, PreNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PreDecision, ToolError>> + Send + 'static,
    {
        self.add_pre(None, hook)
    }

    /// Adds an execute wrapper around the body. It may replace only the signal, by passing
    /// another one to `next.run(signal)`; the caller's cancellation is fused back in regardless.
    pub fn on_execute<F, Fut>(&self, wrapper: F) -> RegistrationGuard
    where
        F: Fn(ExecuteCall, ExecuteNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolExecutionResult, ToolError>> + Send + 'static,
    {
        self.add_execute(None, wrapper)
    }

    /// Adds a post-execute hook. It runs for executed calls and for denials alike.
    pub fn on_post_execute<F, Fut>(&self, hook: F) -> RegistrationGuard
    where
        F: Fn(Arc<ToolCall>, Arc<ToolExecutionResult>, PostNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PostDecision, ToolError>> + Send + 'static,
    {
        self.add_post(None, hook)
    }

    /// Adds an observer of final results. Its failures are logged, never propagated.
    pub fn on_result<F>(&self, observer: F) -> RegistrationGuard
    where
        F: Fn(&ToolCall, &Arc<ToolExecutionResult>) -> Result<(), ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.add_result(None, observer)
    }

    /// Adds an observer of calls entering the pipeline (after the argument snapshot).
    pub fn on_call<F>(&self, observer: F) -> RegistrationGuard
    where
        F: Fn(&ToolCall) + Send + Sync + 'static,
    {
        self.add_hook(None, |hooks, id| hooks.calls.push((id, Arc::new(observer))))
    }

    /// Mounts the approval channel that resolves `ask` decisions (one at a time; the latest
    /// wins). Its scoped answers are remembered for their run or session, and it is asked one
    /// question at a time per agent (see `tools/approvals.rs`).
    pub fn set_approval(&self, approval: impl ApprovalHook) -> RegistrationGuard {
        let approval: Arc<dyn ApprovalHook> = Arc::new(super::approvals::Remembering::new(
            Arc::new(approval),
            self.inner.approvals.clone(),
        ));
        self.add_hook(None, |hooks, id| hooks.approval = Some((id, approval)))
    }

    /// Keeps an approval answer given outside the approval hook (a paused run's, answered on
    /// an MCP session) for the rest of `agent`'s session: later calls of `tool` are decided
    /// by it without asking.
    pub fn remember_approval(&self, agent: &AgentScope, tool: &str, allowed: bool) {
        self.inner
            .approvals
            .keep_for_session(agent.id(), tool, allowed);
    }

    /// The answer `agent`'s session holds for `tool`, if one was scoped to it.
    pub fn remembered_approval(&self, agent: &AgentScope, tool: &str) -> Option<bool> {
        self.inner.approvals.for_session(agent.id(), tool)
    }

    fn add_pre<F, Fut>(&self, scope: Option<&AgentScope>, hook: F) -> RegistrationGuard
    where
        F: Fn(Arc<ToolCall>, PreNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PreDecision, ToolError>> + Send + 'static,
    {
        self.add_hook(scope, |hooks, id| {
            hooks
                .pre
                .push((id, Arc::new(move |call, next| hook(call, next).boxed())));
        })
    }

    fn add_execute<F, Fut>(&self, scope: Option<&AgentScope>, wrapper: F) -> RegistrationGuard
    where
        F: Fn(ExecuteCall, ExecuteNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolExecutionResult, ToolError>> + Send + 'static,
    {
        self.add_hook(scope, |hooks, id| {
            hooks
                .execute
                .push((id, Arc::new(move |call, next| wrapper(call, next).boxed())));
        })
    }

    fn add_post<F, Fut>(&self, scope: Option<&AgentScope>, hook: F) -> RegistrationGuard
    where
        F: Fn(Arc<ToolCall>, Arc<ToolExecutionResult>, PostNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PostDecision, ToolError>> + Send + 'static,
    {
        self.add_hook(scope, |hooks, id| {
            hooks.post.push((
                id,
                Arc::new(move |call, result, next| hook(call, result, next).boxed()),
            ));
        })
    }

    fn add_result<F>(&self, scope: Option<&AgentScope>, observer: F) -> RegistrationGuard
    where
        F: Fn(&ToolCall, &Arc<ToolExecutionResult>) -> Result<(), ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.add_hook(scope, |hooks, id| {
            hooks.results.push((id, Arc::new(observer)))
        })
    }

    /// Runs one call through the whole pipeline. Always returns exactly one final result; a
    /// started body is always awaited, never abandoned.
    pub async fn execute(&self, input: ToolExecutionInput) -> Arc<ToolExecutionResult> {
        self.prepare(input).await.dispatch().await.commit().await
    }

    /// Runs the stages before the body (creation, pre-execute, approval, guards, the
    /// cancellation re-check) and hands back the call, so that a scheduler can dispatch its body
    /// and commit it when it chooses. See [`StagedCall`].
    pub fn prepare(
        &self,
        input: ToolExecutionInput,
    ) -> impl Future<Output = StagedCall> + Send + 'static {
        pipeline::prepare(self.clone(), input)
    }
}

/// `UNSUPPORTED_SCHEMA` registry errors from schema errors, for hosts that build schemas inline.
impl From<super::schema::SchemaError> for RegistryError {
    fn from(error: super::schema::SchemaError) -> Self {
        RegistryError::with_code(error.to_string(), codes::UNSUPPORTED_SCHEMA)
    }
}
