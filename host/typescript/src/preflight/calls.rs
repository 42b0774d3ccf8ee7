//! The statically known calls of binding functions in a program: `tools.name(…)`,
//! `tools["name"](…)`, and calls through a `const` alias of a namespace or a binding
//! destructured from one, wherever they are (functions, loops, callbacks). A name is resolved
//! through the program's scopes, so a local `tools` (a parameter, a variable, a function)
//! shadows the namespace and its calls are left alone; so is everything inside `with`, and the
//! whole program when it assigns to a namespace's name or calls `eval`.

use std::borrow::Cow;

use swc_atoms::Atom;
use swc_common::{Span, Spanned};
use swc_ecma_ast::{
    ArrowExpr, ArrowFunctionBody, AssignTarget, BlockStmt, CallExpr, Callee, CatchClause,
    ClassExpr, Decl, Expr, ExprOrSpread, FnDecl, FnExpr, ForHead, ForInStmt, ForOfStmt, ForStmt,
    Function, Lit, MemberExpr, MemberProp, ObjectPatProp, OptChainBase, OptChainExpr, Pat,
    PropName, SimpleAssignTarget, Stmt, VarDecl, VarDeclKind, VarDeclOrExpr, VarDeclarator,
    WithStmt,
};
use swc_ecma_visit::{Visit, VisitWith};

use crate::source::inside_type_wrapper;

/// One call of a namespace member, as the program wrote it.
pub(super) struct Call<'a> {
    /// Index of the namespace in the list [`find`] was given.
    pub namespace: usize,
    /// The member called.
    pub name: Cow<'a, str>,
    /// Where the member's name is written (the property, the string, or the alias called).
    pub name_span: Span,
    /// The arguments as written.
    pub args: &'a [ExprOrSpread],
    /// `tools.name?.(…)`: the program allows for the member not existing.
    pub optional: bool,
    /// A call of the global `fetch(url, init?)`, which goes through the member `name`.
    pub web: bool,
}

/// What a name in scope stands for.
#[derive(Clone)]
enum Meaning {
    /// Something the program declared; its value is not known.
    Local,
    /// A `const` alias of namespace `n`.
    Namespace(usize),
    /// A `const` binding destructured from namespace `n`: its member `name`.
    Member(usize, String),
    /// The global `fetch`, which calls member `name` of namespace `n` with other arguments.
    Web(usize, String),
}

/// Calls every statically known member call in `body` with `visit`, in source order. Returns
/// the namespaces whose calls cannot be trusted at all (the program assigns to their name).
pub(super) fn find(
    body: &[Stmt],
    namespaces: &[&str],
    web: Option<(usize, &str)>,
    mut visit: impl FnMut(Call<'_>),
) -> Vec<bool> {
    let mut finder = Finder {
        namespaces,
        web,
        names: Vec::new(),
        in_with: 0,
        reassigned: vec![false; namespaces.len()],
        evaluates: false,
        visit: &mut visit,
    };
    finder.enter_function(None, &[], body);
    if finder.evaluates {
        return vec![true; namespaces.len()];
    }
    finder.reassigned
}

struct Finder<'n, 'v> {
    namespaces: &'n [&'n str],
    /// The namespace and member the global `fetch` calls, when the program has one.
    web: Option<(usize, &'n str)>,
    /// Every name in scope, innermost last: a scope is the run of entries it pushed (one
    /// stack rather than a map per scope: most scopes declare nothing or one name).
    names: Vec<(Atom, Meaning)>,
    /// Inside a `with` body, any name may resolve to the object's property.
    in_with: usize,
    reassigned: Vec<bool>,
    /// The program calls `eval`, which can declare names no parse shows.
    evaluates: bool,
    visit: &'v mut dyn FnMut(Call<'_>),
}

impl Finder<'_, '_> {
    fn resolve(&self, name: &Atom) -> Option<Meaning> {
        if self.in_with > 0 {
            return None;
        }
        if let Some((_, meaning)) = self.names.iter().rev().find(|(n, _)| n == name) {
            return Some(meaning.clone());
        }
        if let Some(ns) = self.namespaces.iter().position(|ns| *ns == &**name) {
            return Some(Meaning::Namespace(ns));
        }
        match self.web {
            Some((ns, member)) if &**name == "fetch" => Some(Meaning::Web(ns, member.to_owned())),
            _ => None,
        }
    }

    /// A function (its own name, for an expression), entered as `enter_function` does.
    fn function(&mut self, own: Option<&Atom>, function: &Function) {
        let params: Vec<&Pat> = function.params.iter().map(|p| &p.pat).collect();
        let body = function.body.as_ref().map_or(&[][..], |b| &b.stmts[..]);
        self.enter_function(own, &params, body);
    }

    /// A loop over `right` binding the names its head declares, in a scope of their own.
    fn for_head(&mut self, left: &ForHead, right: &Expr, body: &Stmt) {
        self.scoped(head_names(left), |this| {
            left.visit_with(this);
            right.visit_with(this);
            body.visit_with(this);
        });
    }

    /// A function's scope: its own name (for an expression), its parameters, and every `var`
    /// and function its body declares; then the body's block scope.
    fn enter_function(&mut self, own: Option<&Atom>, params: &[&Pat], body: &[Stmt]) {
        let mut names: Vec<Atom> = own.into_iter().cloned().collect();
        for param in params {
            pat_names(param, &mut names);
        }
        let mut hoisted = Hoisted(&mut names);
        for stmt in body {
            stmt.visit_with(&mut hoisted);
        }
        self.scoped(names, |this| {
            for param in params {
                param.visit_with(this);
            }
            this.block(body);
        });
    }

    /// A block's scope: the `let`, `const`, classes and functions declared directly in it.
    fn block(&mut self, stmts: &[Stmt]) {
        let mut names = Vec::new();
        for stmt in stmts {
            if let Stmt::Decl(decl) = stmt {
                decl_names(decl, &mut names);
            }
        }
        self.scoped(names, |this| {
            for stmt in stmts {
                stmt.visit_with(this);
            }
        });
    }

    /// A scope holding `names` around `inner`.
    fn scoped(&mut self, names: Vec<Atom>, inner: impl FnOnce(&mut Self)) {
        let mark = self.names.len();
        self.names
            .extend(names.into_iter().map(|n| (n, Meaning::Local)));
        inner(self);
        self.names.truncate(mark);
    }

    /// After `const name = <namespace>` or `const { member: name } = <namespace>`, `name`
    /// means the namespace or its member in the current scope.
    fn alias(&mut self, decl: &VarDeclarator) {
        let Some(init) = decl.init.as_deref() else {
            return;
        };
        let Some(Meaning::Namespace(ns)) = self.meaning_of(init) else {
            return;
        };
        // The name is already in the innermost scope (declared when the block was entered):
        // pushed again, it is found first until that scope ends.
        let scope = &mut self.names;
        match &decl.name {
            Pat::Ident(id) => {
                scope.push((id.id.sym.clone(), Meaning::Namespace(ns)));
            }
            Pat::Object(object) => {
                for prop in &object.props {
                    match prop {
                        ObjectPatProp::Assign(assign) if assign.value.is_none() => {
                            let sym = assign.key.id.sym.clone();
                            let member = Meaning::Member(ns, sym.to_string());
                            scope.push((sym, member));
                        }
                        ObjectPatProp::KeyValue(kv) => {
                            if let (Some(key), Pat::Ident(id)) = (prop_name(&kv.key), &*kv.value) {
                                scope.push((
                                    id.id.sym.clone(),
                                    Meaning::Member(ns, key.into_owned()),
                                ));
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// What an expression stands for, when it is a name (or a parenthesized one).
    fn meaning_of(&self, expr: &Expr) -> Option<Meaning> {
        match unwrap(expr) {
            Expr::Ident(id) => self.resolve(&id.sym),
            _ => None,
        }
    }

    /// The member a callee names: `ns.name`, `ns["name"]`, a destructured binding, or the
    /// global `fetch` (the flag).
    fn member<'e>(&self, callee: &'e Expr) -> Option<(usize, Cow<'e, str>, Span, bool)> {
        let of =
            |found: Option<(usize, Cow<'e, str>, Span)>| found.map(|(n, m, s)| (n, m, s, false));
        match unwrap(callee) {
            Expr::Member(member) => of(self.namespace_member(member)),
            Expr::Ident(id) => match self.resolve(&id.sym)? {
                Meaning::Member(ns, name) => Some((ns, Cow::Owned(name), id.span, false)),
                Meaning::Web(ns, name) => Some((ns, Cow::Owned(name), id.span, true)),
                _ => None,
            },
            Expr::OptChain(OptChainExpr { base, .. }) => match &**base {
                OptChainBase::Member(member) => of(self.namespace_member(member)),
                OptChainBase::Call(_) => None,
            },
            _ => None,
        }
    }

    fn namespace_member<'e>(&self, member: &'e MemberExpr) -> Option<(usize, Cow<'e, str>, Span)> {
        let Some(Meaning::Namespace(ns)) = self.meaning_of(&member.obj) else {
            return None;
        };
        let (name, span) = match &member.prop {
            MemberProp::Ident(id) => (Cow::Borrowed(&*id.sym), id.span),
            MemberProp::Computed(computed) => {
                (static_string(&computed.expr)?, computed.expr.span())
            }
            MemberProp::PrivateName(_) => return None,
        };
        Some((ns, name, span))
    }

    fn call<'e>(&mut self, callee: &'e Expr, args: &'e [ExprOrSpread], optional: bool) {
        if let Some((namespace, name, name_span, web)) = self.member(callee) {
            (self.visit)(Call {
                namespace,
                name,
                name_span,
                args,
                optional,
                web,
            });
        }
    }
}

/// Looks through parentheses and type-only wrappers, which leave the value as it is.
pub(super) fn unwrap(mut expr: &Expr) -> &Expr {
    loop {
        expr = match expr {
            Expr::Paren(p) => &p.expr,
            other => match inside_type_wrapper(other) {
                Some(inner) => inner,
                None => return expr,
            },
        }
    }
}

/// A string the expression always is: a string literal or a template without substitutions.
pub(super) fn static_string(expr: &Expr) -> Option<Cow<'_, str>> {
    match unwrap(expr) {
        Expr::Lit(Lit::Str(s)) => Some(s.value.to_string_lossy()),
        Expr::Tpl(tpl) if tpl.exprs.is_empty() => {
            let quasi = tpl.quasis.first()?;
            quasi.cooked.as_ref().map(|c| c.to_string_lossy())
        }
        _ => None,
    }
}

/// A property key known without running anything.
pub(super) fn prop_name(key: &PropName) -> Option<Cow<'_, str>> {
    match key {
        PropName::Ident(id) => Some(Cow::Borrowed(&*id.sym)),
        PropName::Str(s) => Some(s.value.to_string_lossy()),
        PropName::Computed(c) => static_string(&c.expr),
        // A number key's string form is JavaScript's, which the JSON writer also uses; not
        // worth reproducing for keys no schema declares.
        PropName::Num(_) | PropName::BigInt(_) => None,
    }
}

fn pat_names(pat: &Pat, out: &mut Vec<Atom>) {
    match pat {
        Pat::Ident(id) => out.push(id.id.sym.clone()),
        Pat::Array(array) => array.elems.iter().flatten().for_each(|p| pat_names(p, out)),
        Pat::Rest(rest) => pat_names(&rest.arg, out),
        Pat::Object(object) => {
            for prop in &object.props {
                match prop {
                    ObjectPatProp::KeyValue(kv) => pat_names(&kv.value, out),
                    ObjectPatProp::Assign(assign) => out.push(assign.key.id.sym.clone()),
                    ObjectPatProp::Rest(rest) => pat_names(&rest.arg, out),
                }
            }
        }
        Pat::Assign(assign) => pat_names(&assign.left, out),
        Pat::Invalid(_) | Pat::Expr(_) => {}
    }
}

/// The names a declaration binds in its block (a `var` too: it is also in its function's
/// scope, which only widens where the name counts as local).
fn decl_names(decl: &Decl, out: &mut Vec<Atom>) {
    match decl {
        Decl::Var(var) if !var.declare => declarators_names(&var.decls, out),
        Decl::Using(using) => declarators_names(&using.decls, out),
        Decl::Fn(f) if !f.declare => out.push(f.ident.sym.clone()),
        Decl::Class(c) if !c.declare => out.push(c.ident.sym.clone()),
        _ => {}
    }
}

/// The `var`s and functions a function body declares anywhere outside nested functions (a
/// function declared in a block counts too: sloppy-mode code may see it function-wide).
struct Hoisted<'a>(&'a mut Vec<Atom>);

impl Visit for Hoisted<'_> {
    fn visit_var_decl(&mut self, node: &VarDecl) {
        if node.kind == VarDeclKind::Var && !node.declare {
            declarators_names(&node.decls, self.0);
        }
    }
    fn visit_fn_decl(&mut self, node: &FnDecl) {
        if !node.declare {
            self.0.push(node.ident.sym.clone());
        }
    }
    fn visit_function(&mut self, _: &Function) {}
    fn visit_arrow_expr(&mut self, _: &ArrowExpr) {}
    fn visit_class(&mut self, _: &swc_ecma_ast::Class) {}
    fn visit_expr(&mut self, _: &Expr) {}
}

impl Visit for Finder<'_, '_> {
    fn visit_function(&mut self, node: &Function) {
        self.function(None, node);
    }

    fn visit_fn_expr(&mut self, node: &FnExpr) {
        let own = node.ident.as_ref().map(|i| i.sym.clone());
        self.function(own.as_ref(), &node.function);
    }

    fn visit_arrow_expr(&mut self, node: &ArrowExpr) {
        let params: Vec<&Pat> = node.params.iter().collect();
        match &*node.body {
            ArrowFunctionBody::FunctionBody(block) => {
                self.enter_function(None, &params, &block.stmts)
            }
            ArrowFunctionBody::Expr(expr) => {
                let mut names = Vec::new();
                params.iter().for_each(|p| pat_names(p, &mut names));
                self.scoped(names, |this| {
                    params.iter().for_each(|p| p.visit_with(this));
                    expr.visit_with(this);
                });
            }
        }
    }

    fn visit_class_expr(&mut self, node: &ClassExpr) {
        let names = node.ident.iter().map(|i| i.sym.clone()).collect();
        self.scoped(names, |this| node.class.visit_with(this));
    }

    fn visit_block_stmt(&mut self, node: &BlockStmt) {
        self.block(&node.stmts);
    }

    fn visit_catch_clause(&mut self, node: &CatchClause) {
        let mut names = Vec::new();
        if let Some(param) = &node.param {
            pat_names(param, &mut names);
        }
        self.scoped(names, |this| {
            node.param.visit_with(this);
            node.body.visit_with(this);
        });
    }

    fn visit_for_stmt(&mut self, node: &ForStmt) {
        let mut names = Vec::new();
        if let Some(VarDeclOrExpr::VarDecl(var)) = &node.init {
            declarators_names(&var.decls, &mut names);
        }
        self.scoped(names, |this| {
            node.init.visit_with(this);
            node.test.visit_with(this);
            node.update.visit_with(this);
            node.body.visit_with(this);
        });
    }

    fn visit_for_in_stmt(&mut self, node: &ForInStmt) {
        self.for_head(&node.left, &node.right, &node.body);
    }

    fn visit_for_of_stmt(&mut self, node: &ForOfStmt) {
        self.for_head(&node.left, &node.right, &node.body);
    }

    fn visit_with_stmt(&mut self, node: &WithStmt) {
        node.obj.visit_with(self);
        self.in_with += 1;
        node.body.visit_with(self);
        self.in_with -= 1;
    }

    fn visit_var_decl(&mut self, node: &VarDecl) {
        for decl in &node.decls {
            decl.visit_with(self);
            if node.kind == VarDeclKind::Const {
                self.alias(decl);
            }
        }
    }

    fn visit_call_expr(&mut self, node: &CallExpr) {
        if let Callee::Expr(callee) = &node.callee {
            if matches!(&**callee, Expr::Ident(id) if &*id.sym == "eval") {
                self.evaluates = true;
            }
            self.call(callee, &node.args, false);
        }
        node.visit_children_with(self);
    }

    fn visit_opt_chain_expr(&mut self, node: &OptChainExpr) {
        if let OptChainBase::Call(call) = &*node.base {
            self.call(&call.callee, &call.args, node.optional);
        }
        node.visit_children_with(self);
    }

    fn visit_assign_expr(&mut self, node: &swc_ecma_ast::AssignExpr) {
        if let AssignTarget::Simple(SimpleAssignTarget::Ident(id)) = &node.left {
            match self.resolve(&id.id.sym) {
                Some(Meaning::Namespace(ns))
                    if self.namespaces.get(ns).is_some_and(|n| *n == &*id.id.sym) =>
                {
                    self.reassigned[ns] = true;
                }
                // A program that replaces `fetch` may call anything through it.
                Some(Meaning::Web(ns, _)) => self.reassigned[ns] = true,
                _ => {}
            }
        }
        node.visit_children_with(self);
    }
}

/// The names the declarators bind.
fn declarators_names(declarators: &[VarDeclarator], out: &mut Vec<Atom>) {
    declarators.iter().for_each(|d| pat_names(&d.name, out));
}

fn head_names(head: &ForHead) -> Vec<Atom> {
    let mut names = Vec::new();
    match head {
        ForHead::VarDecl(var) => declarators_names(&var.decls, &mut names),
        ForHead::UsingDecl(using) => declarators_names(&using.decls, &mut names),
        ForHead::Pat(_) => {}
    }
    names
}
