//! The program parsed again, and the node at a position the guest reported.

use swc_common::{BytePos, Span, Spanned};
use swc_ecma_ast::{
    AssignTarget, Callee, ClassDecl, ClassExpr, Expr, ExprOrSpread, FnDecl, FnExpr, MemberExpr,
    MemberProp, ObjectPatProp, OptCall, Pat, Prop, PropName, SimpleAssignTarget, Stmt,
};
use swc_ecma_visit::{Visit, VisitWith};

use crate::source::{inside_type_wrapper, Source};

/// What a failing position points at.
pub(super) enum Site {
    /// A call's `(`: the callee's text and, for `ns.name(…)`, the two names.
    Call {
        callee: String,
        member: Option<(String, String)>,
    },
    /// A `new`.
    New { callee: String },
    /// A property read: the object's text and the property (`'c'` or `[expr]`).
    Read { object: String, property: String },
    /// An assignment to a property.
    Write { object: String, property: String },
    /// What a for-of or a spread iterates.
    Iterate { iterable: String },
    /// A destructuring pattern: its first property (`'items'`), if it has one, and the text of
    /// what it destructures, when the program shows it (an initialiser, or the outer
    /// pattern's source and key).
    Destructure {
        key: Option<String>,
        source: Option<String>,
    },
    /// `key in object`: the key as V8 shows it (`'a'` for a string) and the object's text.
    In { key: String, object: String },
}

/// The parsed program, asked what a failing position points at.
pub(super) struct Located(Source);

impl std::ops::Deref for Located {
    type Target = Source;
    fn deref(&self) -> &Source {
        &self.0
    }
}

impl Located {
    pub(super) fn parse(program: &str) -> Option<Self> {
        Source::parse(program).ok().map(Self)
    }

    /// What the failing position `offset` (in the wrapped text) may point at, innermost first:
    /// several nodes can start at one position, and the engine's message says which kind failed.
    pub(super) fn sites_at(&self, offset: usize) -> Vec<Site> {
        let Some(at) = Source::at(offset) else {
            return Vec::new();
        };
        let mut finder = SiteFinder {
            located: self,
            at,
            found: Vec::new(),
        };
        for stmt in &self.body {
            stmt.visit_with(&mut finder);
        }
        // Stable: among nodes of one width, the first visited (the outer one) comes first.
        finder.found.sort_by_key(|(width, _)| *width);
        finder.found.into_iter().map(|(_, site)| site).collect()
    }

    /// Where the program first refers to `name` when nothing in it declares that name: the
    /// place of a `ReferenceError` the engine reported without one.
    pub(super) fn free_reference(&self, name: &str) -> Option<(u32, u32)> {
        let mut refs = References {
            name,
            declared: false,
            first: None,
        };
        for stmt in &self.body {
            stmt.visit_with(&mut refs);
        }
        if refs.declared {
            return None;
        }
        refs.first.map(|span| self.position(span))
    }

    /// The line of the program's last statement and the name it declares, when it is a
    /// declaration of one plain name (`const result = …`): a value the program probably meant
    /// to return.
    pub(super) fn declared_last(&self) -> Option<(u32, String)> {
        let Stmt::Decl(swc_ecma_ast::Decl::Var(var)) = self.body.last()? else {
            return None;
        };
        let [declarator] = &var.decls[..] else {
            return None;
        };
        let Pat::Ident(name) = &declarator.name else {
            return None;
        };
        declarator.init.as_ref()?;
        let (line, _) = self.position(var.span);
        Some((line, name.id.sym.to_string()))
    }
}

/// `a`, `a.b.c` (through parentheses and type assertions): an expression short and plain
/// enough to name what a pattern destructures.
fn path_text(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Ident(id) => Some(id.sym.to_string()),
        Expr::Member(MemberExpr {
            obj,
            prop: MemberProp::Ident(prop),
            ..
        }) => Some(format!("{}.{}", path_text(obj)?, prop.sym)),
        Expr::Paren(p) => path_text(&p.expr),
        other => path_text(inside_type_wrapper(other)?),
    }
}

/// Finds the innermost node the failing position belongs to. With `guest/patches/boa_engine/`
/// applied, every operation that can throw on `undefined` or `null` carries its own position
/// (but for the steps of a spread among a call's arguments, see `call`), so a failure inside a
/// node is not reported at the node's position: Boa places a failed
/// call at its `(` (a tagged template's call right after its tag), a failed `new` at `new`, a
/// failed read at the property (in an optional chain too), a failed assignment at the
/// assignment's start.
struct SiteFinder<'a> {
    located: &'a Located,
    at: BytePos,
    /// The candidates and the widths of their nodes (narrower first, once sorted).
    found: Vec<(u32, Site)>,
}

impl SiteFinder<'_> {
    fn offer(&mut self, span: Span, site: Site) {
        self.found.push((span.hi.0 - span.lo.0, site));
    }

    /// A for-of or spread iterating `expr`: placed at the expression's start.
    fn iterate(&mut self, expr: &Expr) {
        if expr.span().lo == self.at {
            let iterable = self.located.text(expr.span()).to_owned();
            self.offer(expr.span(), Site::Iterate { iterable });
        }
    }

    /// A destructuring pattern that destructures `source`, placed at the pattern's start.
    fn pattern(&mut self, pat: &Pat, source: Option<String>) {
        let (span, key) = match pat {
            Pat::Object(object) => (
                object.span,
                object.props.iter().find_map(|prop| match prop {
                    ObjectPatProp::KeyValue(kv) => self.key_text(&kv.key),
                    ObjectPatProp::Assign(a) => Some(format!("'{}'", a.key.sym)),
                    ObjectPatProp::Rest(_) => None,
                }),
            ),
            Pat::Array(array) => (array.span, None),
            _ => return,
        };
        if span.lo == self.at {
            self.offer(span, Site::Destructure { key, source });
        }
    }

    /// A declarator's pattern and the patterns nested in it, each with the path of what it
    /// destructures (`r`, `r.data`, `r[0]`) while the path can be named.
    fn declared_pattern(&mut self, pat: &Pat, source: Option<String>) {
        self.pattern(pat, source.clone());
        let Some(source) = source else {
            return; // `visit_pat` offers the nested patterns, with no source.
        };
        match pat {
            Pat::Object(object) => {
                for prop in &object.props {
                    if let ObjectPatProp::KeyValue(kv) = prop {
                        let inner = match &kv.key {
                            PropName::Ident(id) => Some(format!("{source}.{}", id.sym)),
                            _ => None,
                        };
                        self.declared_pattern(&kv.value, inner);
                    }
                }
            }
            Pat::Array(array) => {
                for (i, elem) in array.elems.iter().enumerate() {
                    if let Some(elem) = elem {
                        self.declared_pattern(elem, Some(format!("{source}[{i}]")));
                    }
                }
            }
            _ => {}
        }
    }

    fn key_text(&self, key: &PropName) -> Option<String> {
        match key {
            PropName::Ident(id) => Some(format!("'{}'", id.sym)),
            PropName::Str(s) => Some(format!("'{}'", s.value.to_string_lossy())),
            PropName::Num(n) => Some(format!("'{}'", n.value)),
            _ => None,
        }
    }

    /// A call whose `(` is at the position: the first `(` after the callee (and its type
    /// arguments).
    fn call(&mut self, span: Span, callee: &Expr, args: &[ExprOrSpread], after: BytePos) {
        // A spread's steps run under the call's position, so a failing step would be reported
        // here too: such a call is not explained.
        if args.iter().any(|a| a.spread.is_some()) {
            return;
        }
        let Some(rest) = self.located.wrapped_from(after) else {
            return;
        };
        let Some(paren) = rest.find('(') else {
            return;
        };
        if BytePos(after.0 + paren as u32) != self.at {
            return;
        }
        self.offer_call(span, callee);
    }

    fn offer_call(&mut self, span: Span, callee: &Expr) {
        let member = match callee {
            Expr::Member(MemberExpr {
                obj,
                prop: MemberProp::Ident(prop),
                ..
            }) => match &**obj {
                Expr::Ident(ns) => Some((ns.sym.to_string(), prop.sym.to_string())),
                _ => None,
            },
            Expr::Member(MemberExpr {
                obj,
                prop: MemberProp::Computed(computed),
                ..
            }) => match (&**obj, &*computed.expr) {
                (Expr::Ident(ns), Expr::Lit(swc_ecma_ast::Lit::Str(s))) => {
                    Some((ns.sym.to_string(), s.value.to_string_lossy().into_owned()))
                }
                _ => None,
            },
            _ => None,
        };
        let callee_text = self.located.text(callee.span()).to_owned();
        self.offer(
            span,
            Site::Call {
                callee: callee_text,
                member,
            },
        );
    }

    fn member_parts(&self, member: &MemberExpr) -> Option<(Span, String, String)> {
        let (at, property) = match &member.prop {
            MemberProp::Ident(id) => (id.span, format!("'{}'", id.sym)),
            MemberProp::Computed(c) => (
                c.expr.span(),
                format!("[{}]", self.located.text(c.expr.span())),
            ),
            MemberProp::PrivateName(p) => (p.span, self.located.text(p.span).to_owned()),
        };
        Some((
            at,
            self.located.text(member.obj.span()).to_owned(),
            property,
        ))
    }
}

impl Visit for SiteFinder<'_> {
    fn visit_call_expr(&mut self, node: &swc_ecma_ast::CallExpr) {
        if let Callee::Expr(callee) = &node.callee {
            let after = node
                .type_args
                .as_ref()
                .map_or(callee.span().hi, |t| t.span.hi);
            if node.span.lo <= self.at && self.at < node.span.hi {
                self.call(node.span, callee, &node.args, after);
            }
        }
        node.visit_children_with(self);
    }

    fn visit_opt_call(&mut self, node: &OptCall) {
        if node.span.lo <= self.at && self.at < node.span.hi {
            let after = node
                .type_args
                .as_ref()
                .map_or(node.callee.span().hi, |t| t.span.hi);
            self.call(node.span, &node.callee, &node.args, after);
        }
        node.visit_children_with(self);
    }

    fn visit_tagged_tpl(&mut self, node: &swc_ecma_ast::TaggedTpl) {
        if node.tag.span().hi == self.at {
            self.offer_call(node.span, &node.tag);
        }
        node.visit_children_with(self);
    }

    fn visit_new_expr(&mut self, node: &swc_ecma_ast::NewExpr) {
        let spread = node.args.iter().flatten().any(|a| a.spread.is_some());
        if node.span.lo == self.at && !spread {
            let callee = self.located.text(node.callee.span()).to_owned();
            self.offer(node.span, Site::New { callee });
        }
        node.visit_children_with(self);
    }

    fn visit_member_expr(&mut self, node: &MemberExpr) {
        if let Some((at, object, property)) = self.member_parts(node) {
            if at.lo == self.at {
                self.offer(node.span, Site::Read { object, property });
            }
        }
        node.visit_children_with(self);
    }

    fn visit_for_of_stmt(&mut self, node: &swc_ecma_ast::ForOfStmt) {
        self.iterate(&node.right);
        node.visit_children_with(self);
    }

    fn visit_expr_or_spread(&mut self, node: &ExprOrSpread) {
        if node.spread.is_some() {
            self.iterate(&node.expr);
        }
        node.visit_children_with(self);
    }

    fn visit_var_declarator(&mut self, node: &swc_ecma_ast::VarDeclarator) {
        let source = node.init.as_deref().and_then(path_text);
        self.declared_pattern(&node.name, source);
        node.visit_children_with(self);
    }

    fn visit_pat(&mut self, node: &Pat) {
        // Every pattern, with no source (parameters, catch bindings, for-of heads, defaults):
        // a declarator's patterns were offered with their sources first, and win a tie.
        self.pattern(node, None);
        node.visit_children_with(self);
    }

    fn visit_bin_expr(&mut self, node: &swc_ecma_ast::BinExpr) {
        if node.op == swc_ecma_ast::BinaryOp::In && node.span.lo == self.at {
            let key = match &*node.left {
                Expr::Lit(swc_ecma_ast::Lit::Str(s)) => format!("'{}'", s.value.to_string_lossy()),
                left => self.located.text(left.span()).to_owned(),
            };
            let object = self.located.text(node.right.span()).to_owned();
            self.offer(node.span, Site::In { key, object });
        }
        node.visit_children_with(self);
    }

    fn visit_assign_expr(&mut self, node: &swc_ecma_ast::AssignExpr) {
        if node.span.lo == self.at {
            if let AssignTarget::Simple(SimpleAssignTarget::Member(member)) = &node.left {
                if let Some((_, object, property)) = self.member_parts(member) {
                    // Wider than any read inside it, so a failing read still wins.
                    self.offer(node.span, Site::Write { object, property });
                }
            }
        }
        node.visit_children_with(self);
    }
}

/// References to one name, and whether anything declares it.
struct References<'a> {
    name: &'a str,
    declared: bool,
    first: Option<Span>,
}

impl References<'_> {
    fn reference(&mut self, span: Span, sym: &str) {
        if sym == self.name && self.first.is_none_or(|f| span.lo < f.lo) {
            self.first = Some(span);
        }
    }

    fn declare(&mut self, sym: &str) {
        if sym == self.name {
            self.declared = true;
        }
    }
}

impl Visit for References<'_> {
    fn visit_expr(&mut self, node: &Expr) {
        if let Expr::Ident(id) = node {
            self.reference(id.span, &id.sym);
        }
        node.visit_children_with(self);
    }

    fn visit_prop(&mut self, node: &Prop) {
        if let Prop::Shorthand(id) = node {
            self.reference(id.span, &id.sym);
        }
        node.visit_children_with(self);
    }

    fn visit_binding_ident(&mut self, node: &swc_ecma_ast::BindingIdent) {
        self.declare(&node.id.sym);
        node.visit_children_with(self);
    }

    fn visit_fn_decl(&mut self, node: &FnDecl) {
        self.declare(&node.ident.sym);
        node.visit_children_with(self);
    }

    fn visit_class_decl(&mut self, node: &ClassDecl) {
        self.declare(&node.ident.sym);
        node.visit_children_with(self);
    }

    fn visit_fn_expr(&mut self, node: &FnExpr) {
        if let Some(id) = &node.ident {
            self.declare(&id.sym);
        }
        node.visit_children_with(self);
    }

    fn visit_class_expr(&mut self, node: &ClassExpr) {
        if let Some(id) = &node.ident {
            self.declare(&id.sym);
        }
        node.visit_children_with(self);
    }
}
