//! The early errors of a function body's own declarations, which the guest's engine does not
//! raise for the body a program runs as: a name declared twice with `let`, `const` or
//! `class`, or declared so and also with `var` or a function declaration in the same body.
//! Node refuses such a program before running it (`SyntaxError: Identifier 'x' has already
//! been declared`); run anyway, the later declaration would silently win. Inside blocks the
//! engine already refuses them.

use swc_atoms::Atom;
use swc_common::BytePos;
use swc_ecma_ast::*;
use swc_ecma_visit::{Visit, VisitWith};

/// The first declaration of `body` (a function body's statements) that redeclares a name:
/// where it is, and the name.
pub(super) fn first(body: &[Stmt]) -> Option<(BytePos, Atom)> {
    let mut declared: Vec<(Atom, bool)> = Vec::new();
    let mut found: Option<(BytePos, Atom)> = None;
    let mut note = |name: &Atom, at: BytePos, lexical: bool| {
        let clash = declared
            .iter()
            .any(|(seen, seen_lexical)| seen == name && (lexical || *seen_lexical));
        if clash && found.as_ref().is_none_or(|(first, _)| at < *first) {
            found = Some((at, name.clone()));
        }
        declared.push((name.clone(), lexical));
    };
    for stmt in body {
        match stmt {
            Stmt::Decl(Decl::Var(var)) if !var.declare && var.kind != VarDeclKind::Var => {
                for declarator in &var.decls {
                    for (name, at) in bound(&declarator.name) {
                        note(&name, at, true);
                    }
                }
            }
            Stmt::Decl(Decl::Class(class)) if !class.declare => {
                note(&class.ident.sym, class.ident.span.lo, true);
            }
            Stmt::Decl(Decl::Fn(function))
                if !function.declare && function.function.body.is_some() =>
            {
                note(&function.ident.sym, function.ident.span.lo, false);
            }
            _ => {
                let mut vars = Vars(Vec::new());
                stmt.visit_with(&mut vars);
                for (name, at) in vars.0 {
                    note(&name, at, false);
                }
            }
        }
    }
    found
}

/// The `var` declarations of a statement, nested blocks and loops included, functions and
/// classes (scopes of their own) left out.
struct Vars(Vec<(Atom, BytePos)>);

impl Visit for Vars {
    fn visit_var_decl(&mut self, var: &VarDecl) {
        if var.kind == VarDeclKind::Var && !var.declare {
            for declarator in &var.decls {
                self.0.extend(bound(&declarator.name));
            }
        }
        var.visit_children_with(self);
    }

    fn visit_function(&mut self, _: &Function) {}
    fn visit_arrow_expr(&mut self, _: &ArrowExpr) {}
    fn visit_class(&mut self, _: &Class) {}
}

/// The names a binding pattern binds, with where each is written.
fn bound(pat: &Pat) -> Vec<(Atom, BytePos)> {
    let mut out = Vec::new();
    let mut pending = vec![pat];
    while let Some(pat) = pending.pop() {
        match pat {
            Pat::Ident(id) => out.push((id.id.sym.clone(), id.id.span.lo)),
            Pat::Array(array) => pending.extend(array.elems.iter().flatten()),
            Pat::Rest(rest) => pending.push(&rest.arg),
            Pat::Object(object) => {
                for prop in &object.props {
                    match prop {
                        ObjectPatProp::KeyValue(kv) => pending.push(&kv.value),
                        ObjectPatProp::Assign(assign) => {
                            out.push((assign.key.id.sym.clone(), assign.key.id.span.lo))
                        }
                        ObjectPatProp::Rest(rest) => pending.push(&rest.arg),
                    }
                }
            }
            Pat::Assign(assign) => pending.push(&assign.left),
            Pat::Invalid(_) | Pat::Expr(_) => {}
        }
    }
    out
}
