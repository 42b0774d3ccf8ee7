//! Types erased from the syntax tree swc parsed, each erased character becoming one space (a
//! line break stays), so that every line and column of the JavaScript is the one the model
//! wrote.
//!
//! Erasing is not always only blanking: where the blank would let the next line join the
//! previous statement (`x as T` then a line starting with `(`), or leave a line break where
//! JavaScript forbids one (an arrow's return type spanning lines), one erased character
//! becomes `;`, `(` or `)` instead. Syntax that would need code generated (`enum`, a
//! `namespace` with values, parameter properties, `<T>x`) is refused with its position.

mod classes;
mod edits;
mod gaps;

#[cfg(any(test, feature = "reference"))]
pub(super) use gaps::is_line_break;

use swc_common::{BytePos, Span, Spanned};
use swc_ecma_ast::*;
use swc_ecma_visit::{Visit, VisitWith};

use crate::source::inside_type_wrapper;
use edits::Edits;

/// A construct that cannot be erased, and where it starts (a byte offset in the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub at: usize,
    pub construct: Construct,
}

/// What was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Construct {
    Enum,
    Namespace,
    GlobalWithoutDeclare,
    ExportAsNamespace,
    ParameterProperty,
    AngleBracketAssertion,
    UnaryBeforeExponent,
}

impl Construct {
    /// What to tell the model.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Self::Enum => {
                "TypeScript `enum` is not supported: programs run with their types stripped, and an enum needs generated code; use an object (`const Color = { Red: \"red\" } as const`)"
            }
            Self::Namespace => {
                "a TypeScript `namespace` holding values is not supported: programs run with their types stripped, and it needs generated code; use an object or plain functions"
            }
            Self::GlobalWithoutDeclare => {
                "`global { … }` declares types for the global scope and must be `declare global { … }`; code in it would never run: move the code out of the block"
            }
            Self::ExportAsNamespace => {
                "`export as namespace` belongs in a declaration file, not in a program: remove it"
            }
            Self::ParameterProperty => {
                "TypeScript parameter properties (`constructor(private x: T)`) are not supported: programs run with their types stripped; declare the field and assign it in the constructor"
            }
            Self::AngleBracketAssertion => {
                "the `<T>expr` type assertion cannot be stripped: write `expr as T`"
            }
            Self::UnaryBeforeExponent => {
                "a unary or `await` expression on the left of `**` needs parentheses once its type assertion is stripped: write `(-x as number) ** 2`"
            }
        }
    }
}

/// Erases the types of `body` (statements of the function body that `text` wraps; spans
/// index `text` from `base`). Returns the JavaScript text, or the first construct refused.
pub(crate) fn erase(text: &str, base: u32, body: &[Stmt]) -> Result<String, Refusal> {
    let mut eraser = Eraser {
        text,
        base,
        edits: Edits::default(),
        refused: None,
        place: Place::default(),
    };
    eraser.items(body, true);
    match eraser.refused {
        Some(refusal) => Err(refusal),
        None => Ok(eraser.edits.apply(text)),
    }
}

/// Where the node being visited stands in its list of statements or class members, for the
/// one erased character that keeps the list's meaning (see [`Eraser::erase_whole`]).
#[derive(Clone, Copy, Default)]
struct Place {
    /// The nearest earlier item of the list that is kept.
    kept_before: Option<Span>,
    /// Every earlier item of a function body is a string expression (a directive, maybe): an
    /// erased item here must still end that prologue.
    in_prologue: bool,
    /// The body of `if`, a loop, `with` or a label: a statement must stay.
    required: bool,
    /// The item is a string expression statement.
    directive: bool,
    /// The item was erased whole.
    erased: bool,
}

struct Eraser<'a> {
    text: &'a str,
    base: u32,
    edits: Edits,
    refused: Option<Refusal>,
    place: Place,
}

/// An item of a list [`Eraser::items`] walks.
trait Item: Spanned {
    fn is_directive(&self) -> bool;
}

impl Item for Stmt {
    fn is_directive(&self) -> bool {
        matches!(self, Stmt::Expr(e) if matches!(*e.expr, Expr::Lit(Lit::Str(_))))
    }
}

impl Item for ClassMember {
    fn is_directive(&self) -> bool {
        false
    }
}

impl Eraser<'_> {
    fn at(&self, pos: BytePos) -> usize {
        pos.0.saturating_sub(self.base) as usize
    }

    fn blank(&mut self, lo: BytePos, hi: BytePos) {
        let (start, end) = (self.at(lo), self.at(hi));
        self.edits.blank(start, end);
    }

    fn blank_span(&mut self, span: Span) {
        self.blank(span.lo, span.hi);
    }

    fn refuse(&mut self, lo: BytePos, construct: Construct) {
        let at = self.at(lo);
        if self.refused.is_none_or(|r| at < r.at) {
            self.refused = Some(Refusal { at, construct });
        }
    }

    /// Walks a list of statements or class members, telling each where it stands.
    fn items<N: Item + VisitWith<Self>>(&mut self, list: &[N], prologue: bool) {
        let saved = self.place;
        let mut kept_before = None;
        let mut in_prologue = prologue;
        for item in list {
            self.place = Place {
                kept_before,
                in_prologue,
                directive: item.is_directive(),
                ..Place::default()
            };
            item.visit_with(self);
            in_prologue &= self.place.directive;
            if !self.place.erased {
                kept_before = Some(item.span());
            }
        }
        self.place = saved;
    }

    /// Visits `stmt` as a statement that must stay a statement.
    fn required(&mut self, stmt: &Stmt) {
        let saved = self.place;
        self.place = Place {
            required: true,
            ..Place::default()
        };
        stmt.visit_with(self);
        self.place = saved;
    }

    /// Erases a whole statement or class member. Its first character becomes `;` where the
    /// item must not vanish: as the body of an `if` or loop, where it ends a directive
    /// prologue, or where the kept item before it does not end in `;` (so the next line
    /// cannot join that item).
    fn erase_whole(&mut self, span: Span) {
        self.blank_span(span);
        self.place.erased = true;
        if self.needs_separator() {
            self.edits.put(self.at(span.lo), ';');
        }
    }

    fn needs_separator(&self) -> bool {
        self.place.required
            || self.place.in_prologue
            || self
                .place
                .kept_before
                .is_some_and(|kept| !self.ends_with_semicolon(kept))
    }

    fn ends_with_semicolon(&self, span: Span) -> bool {
        let end = self.at(span.hi);
        end > 0 && self.text.as_bytes().get(end - 1) == Some(&b';')
    }

    /// The tokens from `from` until one starts at or after `to`.
    fn tokens(&self, from: BytePos, to: BytePos) -> impl Iterator<Item = gaps::Token> + '_ {
        gaps::tokens(self.text, self.at(from), self.at(to))
    }

    fn token_text(&self, token: gaps::Token) -> &str {
        gaps::text_of(self.text, token)
    }

    /// Blanks the first `punctuator` among the tokens from `from` to `to`.
    fn blank_marker(&mut self, from: BytePos, to: BytePos, punctuator: &str) -> Option<usize> {
        let marker = self
            .tokens(from, to)
            .find(|&t| self.token_text(t) == punctuator)?;
        self.edits.blank(marker.start, marker.end);
        Some(marker.start)
    }

    /// Blanks the `?` of an optional destructuring parameter, which follows the pattern's
    /// closing bracket.
    fn blank_optional_marker(&mut self, core_end: BytePos, to: Option<BytePos>) {
        let from = self.at(core_end);
        let to = to.map_or(usize::MAX, |to| self.at(to));
        let marker = gaps::tokens(self.text, from, to)
            .find(|&t| !matches!(gaps::text_of(self.text, t), "]" | "}" | ","));
        if let Some(marker) = marker.filter(|&t| gaps::text_of(self.text, t) == "?") {
            self.edits.blank(marker.start, marker.end);
        }
    }

    /// Erases what follows an expression inside `wrapper` (`!`, `<T>`).
    fn erase_suffix(&mut self, expr: &Expr, wrapper: Span) {
        self.blank(expr.span_hi(), wrapper.hi);
    }

    /// Erases `as T` or `satisfies T` after an expression. A next line that starts with `(`,
    /// `[` or a template would join the expression once the type is gone: a `;` keeps them
    /// apart.
    fn erase_assertion(&mut self, expr: &Expr, wrapper: Span) {
        let end = expr.span_hi();
        self.erase_suffix(expr, wrapper);
        let Some(next) = gaps::next(self.text, self.at(wrapper.hi)) else {
            return;
        };
        if next.after_line_break && matches!(self.token_text(next), "(" | "[" | "`") {
            self.edits.put(self.at(end), ';');
        }
    }

    /// `async <T>(x) => x` and `return <T>(x) => x` with a line break inside or after the
    /// type parameters: blanked, the line break would end the statement (or split `async`
    /// from its arrow), so the `(` moves to where the `<` was.
    fn move_opening_parenthesis(&mut self, arrow: &ArrowExpr) {
        let Some(params) = &arrow.type_params else {
            return;
        };
        let start = self.at(params.span.lo);
        let restricted = matches!(
            gaps::word_before(self.text, start),
            "return" | "throw" | "yield"
        );
        if !arrow.is_async && !restricted {
            return;
        }
        let Some(open) = gaps::next(self.text, self.at(params.span.hi)) else {
            return;
        };
        if self.token_text(open) != "(" || !gaps::has_line_break(self.text, start, open.start) {
            return;
        }
        self.edits.put(start, '(');
        self.edits.blank(open.start, open.end);
    }

    /// An arrow whose return type spans lines: blanked, it would leave a line break before
    /// `=>`, which JavaScript forbids, so the parameters' `)` moves to the type's last
    /// character.
    fn move_closing_parenthesis(&mut self, arrow: &ArrowExpr) {
        let Some(returns) = &arrow.return_type else {
            return;
        };
        let from = arrow
            .params
            .last()
            .map(Spanned::span_hi)
            .or(arrow.type_params.as_ref().map(|p| p.span.hi))
            .unwrap_or(arrow.span.lo);
        let Some(close) = self
            .tokens(from, returns.span.lo)
            .find(|&t| self.token_text(t) == ")")
        else {
            return;
        };
        let Some(arrow_token) = gaps::next(self.text, self.at(returns.span.hi)) else {
            return;
        };
        if self.token_text(arrow_token) != "=>"
            || !gaps::has_line_break(self.text, close.end, arrow_token.start)
        {
            return;
        }
        let type_end = self.at(returns.span.hi);
        let Some(last) = self
            .text
            .get(..type_end)
            .and_then(|t| t.chars().next_back())
        else {
            return;
        };
        self.edits.blank(close.start, type_end);
        self.edits.put(type_end - last.len_utf8(), ')');
    }
}

/// Where a namespace outside `declare` has `export as namespace`, which only a declaration
/// file may.
fn export_as_namespace(module: &TsModuleDecl) -> Option<swc_common::BytePos> {
    fn within(body: &TsNamespaceBody) -> Option<swc_common::BytePos> {
        match body {
            TsNamespaceBody::TsNamespaceDecl(inner) => within(&inner.body),
            TsNamespaceBody::TsModuleBlock(block) => {
                block.body.iter().find_map(|item| match item {
                    ModuleItem::ModuleDecl(ModuleDecl::TsNamespaceExport(export)) => {
                        Some(export.span.lo)
                    }
                    ModuleItem::Stmt(Stmt::Decl(Decl::TsModule(inner)))
                        if !inner.declare && !inner.global =>
                    {
                        inner.body.as_ref().and_then(within)
                    }
                    _ => None,
                })
            }
        }
    }
    module.body.as_ref().and_then(within)
}

/// Whether a `namespace` or `module` declaration declares only types (`global` only under
/// `declare`: without it the block is refused, see [`Construct::GlobalWithoutDeclare`]).
fn declares_types_only(module: &TsModuleDecl) -> bool {
    module.declare
        || matches!(module.id, TsModuleName::Str(_))
        || module.body.as_ref().is_some_and(namespace_types_only)
}

fn namespace_types_only(body: &TsNamespaceBody) -> bool {
    match body {
        TsNamespaceBody::TsNamespaceDecl(inner) => namespace_types_only(&inner.body),
        TsNamespaceBody::TsModuleBlock(block) => block.body.iter().all(|item| match item {
            ModuleItem::Stmt(Stmt::Decl(decl)) => !decl_has_values(decl),
            ModuleItem::ModuleDecl(ModuleDecl::ExportDecl(export)) => {
                !decl_has_values(&export.decl)
            }
            ModuleItem::ModuleDecl(ModuleDecl::Import(_) | ModuleDecl::TsNamespaceExport(_)) => {
                true
            }
            ModuleItem::ModuleDecl(ModuleDecl::ExportNamed(export)) => export.type_only,
            ModuleItem::ModuleDecl(ModuleDecl::TsImportEquals(import)) => import.is_type_only,
            _ => false,
        }),
    }
}

fn decl_has_values(decl: &Decl) -> bool {
    match decl {
        Decl::TsInterface(_) | Decl::TsTypeAlias(_) => false,
        Decl::TsModule(module) => !declares_types_only(module),
        _ => true,
    }
}

/// Whether a declaration is a type only, erased whole.
fn declares_nothing_at_run_time(decl: &Decl) -> bool {
    match decl {
        Decl::TsInterface(_) | Decl::TsTypeAlias(_) => true,
        Decl::Class(class) => class.declare,
        Decl::Fn(function) => function.declare || function.function.body.is_none(),
        Decl::Var(var) => var.declare,
        Decl::TsEnum(enumeration) => enumeration.declare,
        Decl::TsModule(module) => declares_types_only(module),
        _ => false,
    }
}

/// `expr` without the type assertions around it (not its parentheses, which stay).
fn without_assertions(mut expr: &Expr) -> &Expr {
    while let Some(inner) = inside_type_wrapper(expr) {
        expr = inner;
    }
    expr
}

impl Visit for Eraser<'_> {
    fn visit_expr(&mut self, n: &Expr) {
        // Most expressions are names: nothing to erase in them.
        if !n.is_ident() {
            n.visit_children_with(self);
        }
    }

    fn visit_function_body(&mut self, n: &FunctionBody) {
        self.items(&n.stmts, true);
    }

    fn visit_arrow_expr(&mut self, n: &ArrowExpr) {
        self.move_opening_parenthesis(n);
        self.move_closing_parenthesis(n);
        n.visit_children_with(self);
    }

    fn visit_stmts(&mut self, n: &[Stmt]) {
        self.items(n, false);
    }

    fn visit_class_members(&mut self, n: &[ClassMember]) {
        self.items(n, false);
    }

    fn visit_if_stmt(&mut self, n: &IfStmt) {
        n.test.visit_with(self);
        self.required(&n.cons);
        if let Some(alt) = &n.alt {
            self.required(alt);
        }
    }

    fn visit_labeled_stmt(&mut self, n: &LabeledStmt) {
        self.required(&n.body);
    }

    fn visit_while_stmt(&mut self, n: &WhileStmt) {
        n.test.visit_with(self);
        self.required(&n.body);
    }

    fn visit_do_while_stmt(&mut self, n: &DoWhileStmt) {
        self.required(&n.body);
        n.test.visit_with(self);
    }

    fn visit_for_stmt(&mut self, n: &ForStmt) {
        n.init.visit_with(self);
        n.test.visit_with(self);
        n.update.visit_with(self);
        self.required(&n.body);
    }

    fn visit_for_in_stmt(&mut self, n: &ForInStmt) {
        n.left.visit_with(self);
        n.right.visit_with(self);
        self.required(&n.body);
    }

    fn visit_for_of_stmt(&mut self, n: &ForOfStmt) {
        n.left.visit_with(self);
        n.right.visit_with(self);
        self.required(&n.body);
    }

    fn visit_with_stmt(&mut self, n: &WithStmt) {
        n.obj.visit_with(self);
        self.required(&n.body);
    }

    fn visit_decl(&mut self, n: &Decl) {
        match n {
            Decl::TsEnum(e) if !e.declare => self.refuse(e.span.lo, Construct::Enum),
            Decl::TsModule(m) if m.global && !m.declare => {
                self.refuse(m.span.lo, Construct::GlobalWithoutDeclare)
            }
            Decl::TsModule(m) if !m.declare && export_as_namespace(m).is_some() => {
                let at = export_as_namespace(m).unwrap_or(m.span.lo);
                self.refuse(at, Construct::ExportAsNamespace)
            }
            Decl::TsModule(m) if !declares_types_only(m) => {
                self.refuse(m.span.lo, Construct::Namespace)
            }
            _ if declares_nothing_at_run_time(n) => self.erase_whole(n.span()),
            _ => n.visit_children_with(self),
        }
    }

    fn visit_ts_type_ann(&mut self, n: &TsTypeAnn) {
        self.blank_span(n.span);
    }

    fn visit_ts_type_param_decl(&mut self, n: &TsTypeParamDecl) {
        self.blank_span(n.span);
    }

    fn visit_ts_type_param_instantiation(&mut self, n: &TsTypeParamInstantiation) {
        self.blank_span(n.span);
    }

    fn visit_ts_this_param(&mut self, n: &TsThisParam) {
        let comma = gaps::next(self.text, self.at(n.span.hi))
            .filter(|&t| self.token_text(t) == ",")
            .map_or(self.at(n.span.hi), |t| t.end);
        let start = self.at(n.span.lo);
        self.edits.blank(start, comma);
    }

    fn visit_ts_param_prop(&mut self, n: &TsParamProp) {
        self.refuse(n.span.lo, Construct::ParameterProperty);
    }

    fn visit_var_declarator(&mut self, n: &VarDeclarator) {
        if let (true, Pat::Ident(id)) = (n.definite, &n.name) {
            self.blank_marker(id.id.span.hi, n.span.hi, "!");
        }
        n.visit_children_with(self);
    }

    fn visit_binding_ident(&mut self, n: &BindingIdent) {
        if n.id.optional {
            // The marker follows the name. Where the name's span ends is no guide: for an
            // arrow's parameter swc widens it over the marker and the type.
            let to = n
                .type_ann
                .as_ref()
                .map_or(usize::MAX, |t| self.at(t.span.lo));
            let marker = gaps::tokens(self.text, self.at(n.id.span.lo), to)
                .nth(1)
                .filter(|&t| self.token_text(t) == "?");
            if let Some(marker) = marker {
                self.edits.blank(marker.start, marker.end);
            }
        }
        n.visit_children_with(self);
    }

    fn visit_array_pat(&mut self, n: &ArrayPat) {
        if n.optional {
            let inner = n.elems.iter().flatten().last().map(Spanned::span_hi);
            self.blank_optional_marker(
                inner.unwrap_or(n.span.lo + BytePos(1)),
                n.type_ann.as_ref().map(|t| t.span.lo),
            );
        }
        n.visit_children_with(self);
    }

    fn visit_object_pat(&mut self, n: &ObjectPat) {
        if n.optional {
            let inner = n.props.last().map(Spanned::span_hi);
            self.blank_optional_marker(
                inner.unwrap_or(n.span.lo + BytePos(1)),
                n.type_ann.as_ref().map(|t| t.span.lo),
            );
        }
        n.visit_children_with(self);
    }

    fn visit_bin_expr(&mut self, n: &BinExpr) {
        if n.op == BinaryOp::Exp
            && matches!(without_assertions(&n.left), Expr::Unary(_) | Expr::Await(_))
        {
            self.refuse(n.left.span_lo(), Construct::UnaryBeforeExponent);
        }
        n.visit_children_with(self);
    }

    fn visit_ts_as_expr(&mut self, n: &TsAsExpr) {
        n.expr.visit_with(self);
        self.erase_assertion(&n.expr, n.span);
    }

    fn visit_ts_satisfies_expr(&mut self, n: &TsSatisfiesExpr) {
        n.expr.visit_with(self);
        self.erase_assertion(&n.expr, n.span);
    }

    fn visit_ts_const_assertion(&mut self, n: &TsConstAssertion) {
        if n.span.lo < n.expr.span_lo() {
            self.refuse(n.span.lo, Construct::AngleBracketAssertion);
            return;
        }
        n.expr.visit_with(self);
        self.erase_assertion(&n.expr, n.span);
    }

    fn visit_ts_non_null_expr(&mut self, n: &TsNonNullExpr) {
        n.expr.visit_with(self);
        self.erase_suffix(&n.expr, n.span);
    }

    fn visit_ts_instantiation(&mut self, n: &TsInstantiation) {
        n.expr.visit_with(self);
        self.erase_suffix(&n.expr, n.span);
    }

    fn visit_ts_type_assertion(&mut self, n: &TsTypeAssertion) {
        self.refuse(n.span.lo, Construct::AngleBracketAssertion);
    }

    fn visit_class(&mut self, n: &Class) {
        self.erase_class_header(n);
        // `implements` is erased whole above: only the rest is walked.
        n.super_class.visit_with(self);
        n.type_params.visit_with(self);
        n.super_type_params.visit_with(self);
        n.body.visit_with(self);
    }

    fn visit_class_member(&mut self, n: &ClassMember) {
        self.erase_class_member(n);
    }
}

#[cfg(test)]
mod tests;
