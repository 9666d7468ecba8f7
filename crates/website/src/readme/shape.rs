//! What the sanitiser's HTML parser would build from a README's HTML, measured before the
//! sanitiser parses it (issue 42, point 6).
//!
//! `ammonia` parses with `html5ever`, which follows the HTML standard to the letter and so
//! does two things a hostile README can turn into minutes and gigabytes: it keeps every
//! unclosed formatting element (`<b>`, `<i>`, `<a>`, …) in its list of active formatting
//! elements and, whenever text follows a block that closed them, re-creates all of them
//! (`<p><b class=a0>…<b class=aN></p>` and then `M × <p>x</p>` makes N × M elements); and
//! each tag looks through the stack of open elements, so a tree nested N deep costs N² (a
//! few bytes of `- - - - …` or `<div><div>…` are enough). GitHub's sanitiser refuses a tree
//! deeper than 400 (Nokogiri's HTML5 parser, `max_tree_depth`).
//!
//! So the HTML is first parsed by the same parser into a sink that keeps no document, only
//! what it costs: how deep each new element sits and how many bytes the elements and text
//! would take. The HTML is fed a tag at a time and the measure stops as soon as a bound is
//! passed, so one step costs at most one tag's worth of work on a tree at most
//! [`MAX_DEPTH`] deep (with its re-created formatting elements): the hostile input is never
//! parsed to the end.

use budget::{Budget, Stop};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, ExpandedName, LocalName, Namespace, ParseOpts, QualName};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

/// The deepest tree a README may make (GitHub's limit): deeper, the parser's cost grows with
/// the square of the depth.
pub(super) const MAX_DEPTH: usize = 400;

/// Pieces (a tag and the text before it) between two looks at the budget.
const PIECES_PER_CHECK: u32 = 256;

/// What the parser would make of the HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// Within bounds: about `bytes` of elements and text.
    Fits { bytes: u64 },
    /// An element would sit more than [`MAX_DEPTH`] deep.
    TooDeep,
    /// The elements and text would take more than the bytes allowed; `bytes` when measuring
    /// stopped.
    Expands { bytes: u64 },
}

/// The shape of `html` (a fragment, parsed as the sanitiser parses it: inside a `div`, with
/// scripting off) when it may make at most `allowed` bytes. Stops when `budget` does.
pub(super) fn measure(html: &str, allowed: u64, budget: &Budget) -> Result<Shape, Stop> {
    let sink = Measure::default();
    let totals = Rc::clone(&sink.totals);
    let mut parser = html5ever::parse_fragment(
        sink,
        ParseOpts::default(),
        QualName::new(None, html5ever::ns!(html), html5ever::local_name!("div")),
        Vec::new(),
        false,
    );
    let mut pieces = 0u32;
    let mut from = 0;
    while from < html.len() {
        // Up to the next `<` after this one: one tag (or its start) and the text after it
        // (`<` is ASCII, so both ends are character boundaries).
        let to = html.as_bytes()[from + 1..]
            .iter()
            .position(|&b| b == b'<')
            .map_or(html.len(), |i| from + 1 + i);
        parser.process(StrTendril::from_slice(&html[from..to]));
        from = to;
        if totals.deepest.get() > MAX_DEPTH {
            return Ok(Shape::TooDeep);
        }
        if totals.bytes.get() > allowed {
            return Ok(Shape::Expands {
                bytes: totals.bytes.get(),
            });
        }
        pieces += 1;
        if pieces.is_multiple_of(PIECES_PER_CHECK) {
            budget.check()?;
        }
    }
    // The end closes what is open, which creates nothing: no need to run it.
    Ok(Shape::Fits {
        bytes: totals.bytes.get(),
    })
}

/// What the parse has cost so far.
#[derive(Debug, Default)]
struct Totals {
    /// The deepest any element was put.
    deepest: Cell<usize>,
    /// Elements (their tags, attributes and all) and text, about as serialised.
    bytes: Cell<u64>,
}

impl Totals {
    fn add(&self, bytes: usize) {
        self.bytes
            .set(self.bytes.get().saturating_add(bytes as u64));
    }
}

/// A node as the measure keeps it: its name and its parent, so that depths can be counted;
/// its children only weakly, so that a node the parser let go of is freed.
struct Node {
    name: QualName,
    parent: RefCell<Option<Rc<Node>>>,
    children: RefCell<Vec<Weak<Node>>>,
    template: Option<Rc<Node>>,
    integration_point: bool,
}

type Handle = Rc<Node>;

impl Node {
    fn new(name: QualName, template: bool, integration_point: bool) -> Handle {
        Rc::new(Node {
            name,
            parent: RefCell::new(None),
            children: RefCell::new(Vec::new()),
            template: template.then(|| Node::new(nameless(), false, false)),
            integration_point,
        })
    }

    /// How many ancestors the node has, counted up to `MAX_DEPTH + 1`.
    fn depth(self: &Rc<Self>) -> usize {
        let mut depth = 0;
        let mut at = self.parent.borrow().clone();
        while let Some(node) = at {
            depth += 1;
            if depth > MAX_DEPTH {
                break;
            }
            at = node.parent.borrow().clone();
        }
        depth
    }

    fn is_parent_of(self: &Rc<Self>, child: &Node) -> bool {
        child
            .parent
            .borrow()
            .as_ref()
            .is_some_and(|p| Rc::ptr_eq(p, self))
    }

    fn adopt(self: &Rc<Self>, child: &Handle) {
        child.parent.replace(Some(Rc::clone(self)));
        let mut children = self.children.borrow_mut();
        // Children that went away or moved are dropped now and then, so the list stays as
        // long as the children the node really has.
        if children.len() >= 16 && children.len().is_power_of_two() {
            children.retain(|c| c.upgrade().is_some_and(|c| self.is_parent_of(&c)));
        }
        children.push(Rc::downgrade(child));
    }
}

/// Parents are let go of one by one: a chain of ancestors as long as a hostile tree may make
/// would otherwise be dropped recursively, one stack frame per level.
impl Drop for Node {
    fn drop(&mut self) {
        let mut next = self.parent.get_mut().take();
        while let Some(parent) = next {
            next = match Rc::try_unwrap(parent) {
                Ok(mut node) => node.parent.get_mut().take(),
                Err(_) => None,
            };
        }
    }
}

fn nameless() -> QualName {
    QualName::new(None, Namespace::from(""), LocalName::from(""))
}

/// The sink: builds no document, counts.
struct Measure {
    document: Handle,
    totals: Rc<Totals>,
}

impl Default for Measure {
    fn default() -> Self {
        Measure {
            document: Node::new(nameless(), false, false),
            totals: Rc::default(),
        }
    }
}

impl Measure {
    fn placed(&self, node: &Handle) {
        let depth = node.depth();
        if depth > self.totals.deepest.get() {
            self.totals.deepest.set(depth);
        }
    }

    fn append_child(&self, parent: &Handle, child: NodeOrText<Handle>) {
        match child {
            NodeOrText::AppendNode(node) => {
                parent.adopt(&node);
                self.placed(&node);
            }
            NodeOrText::AppendText(text) => self.totals.add(text.len()),
        }
    }
}

impl TreeSink for Measure {
    type Handle = Handle;
    type Output = ();
    type ElemName<'a> = ExpandedName<'a>;

    fn finish(self) {}

    fn parse_error(&self, _msg: Cow<'static, str>) {}

    fn get_document(&self) -> Handle {
        Rc::clone(&self.document)
    }

    fn elem_name<'a>(&'a self, target: &'a Handle) -> ExpandedName<'a> {
        target.name.expanded()
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Handle {
        // `<name attrs>` and `</name>`.
        let tag = 2 * name.local.len() + 5;
        let attrs: usize = attrs
            .iter()
            .map(|a| a.name.local.len() + a.value.len() + 4)
            .sum();
        self.totals.add(tag + attrs);
        Node::new(
            name,
            flags.template,
            flags.mathml_annotation_xml_integration_point,
        )
    }

    fn create_comment(&self, text: StrTendril) -> Handle {
        self.totals.add(text.len() + 7);
        Node::new(nameless(), false, false)
    }

    fn create_pi(&self, _target: StrTendril, _data: StrTendril) -> Handle {
        Node::new(nameless(), false, false)
    }

    fn append(&self, parent: &Handle, child: NodeOrText<Handle>) {
        self.append_child(parent, child);
    }

    fn append_based_on_parent_node(
        &self,
        element: &Handle,
        prev_element: &Handle,
        child: NodeOrText<Handle>,
    ) {
        if element.parent.borrow().is_some() {
            self.append_before_sibling(element, child);
        } else {
            self.append_child(prev_element, child);
        }
    }

    fn append_doctype_to_document(&self, _: StrTendril, _: StrTendril, _: StrTendril) {}

    fn get_template_contents(&self, target: &Handle) -> Handle {
        // Only asked of a template, which has its contents; anything else gets a fresh node.
        target
            .template
            .clone()
            .unwrap_or_else(|| Node::new(nameless(), false, false))
    }

    fn same_node(&self, x: &Handle, y: &Handle) -> bool {
        Rc::ptr_eq(x, y)
    }

    fn set_quirks_mode(&self, _mode: QuirksMode) {}

    fn append_before_sibling(&self, sibling: &Handle, child: NodeOrText<Handle>) {
        // Where among the siblings does not change any depth.
        let parent = sibling.parent.borrow().clone();
        match parent {
            Some(parent) => self.append_child(&parent, child),
            None => self.append_child(&self.document, child),
        }
    }

    fn add_attrs_if_missing(&self, _target: &Handle, attrs: Vec<Attribute>) {
        let bytes: usize = attrs
            .iter()
            .map(|a| a.name.local.len() + a.value.len() + 4)
            .sum();
        self.totals.add(bytes);
    }

    fn remove_from_parent(&self, target: &Handle) {
        target.parent.replace(None);
    }

    fn reparent_children(&self, node: &Handle, new_parent: &Handle) {
        let children = std::mem::take(&mut *node.children.borrow_mut());
        for child in children.iter().filter_map(Weak::upgrade) {
            if node.is_parent_of(&child) {
                new_parent.adopt(&child);
            }
        }
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &Handle) -> bool {
        handle.integration_point
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testgit::hostile::formatting_bomb;

    const MIB: u64 = 1 << 20;

    fn shape(html: &str) -> Shape {
        measure(html, MIB, &Budget::unlimited()).unwrap()
    }

    #[test]
    fn ordinary_html_fits_and_is_measured_about_as_long_as_it_is() {
        for html in [
            "<p>Hello <b>world</b> and <a href=\"x\">a link</a></p>\n<ul>\n<li>one</li>\n</ul>\n",
            "<table><tr><td>a<td>b<tr><td>c</table>",
            "<p>a<p>b<p>c<div>d</div>",
            "<details><summary>More</summary><p>text</p></details>",
            "<!-- <b><b><b> --><p>x</p>",
        ] {
            match shape(html) {
                Shape::Fits { bytes } => {
                    assert!(bytes <= 2 * html.len() as u64 + 64, "{html}: {bytes}")
                }
                other => panic!("{html}: {other:?}"),
            }
        }
        let rows = "<table>".to_owned() + &"<tr><td>a<td>b".repeat(2000) + "</table>";
        assert!(matches!(shape(&rows), Shape::Fits { .. }));
        assert!(matches!(shape(&"<p>x".repeat(5000)), Shape::Fits { .. }));
        // A few unclosed formatting tags reopen in every block: counted, and allowed.
        assert!(
            matches!(shape(&formatting_bomb(3, 100)), Shape::Fits { bytes } if bytes > 3 * 100 * 10)
        );
    }

    #[test]
    fn the_formatting_element_bomb_is_too_deep_or_expands() {
        assert_eq!(shape(&formatting_bomb(2000, 2000)), Shape::TooDeep);
        match shape(&formatting_bomb(300, 2000)) {
            Shape::Expands { bytes } => assert!(bytes > MIB, "{bytes}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn deep_nesting_is_too_deep() {
        for html in [
            "<div>".repeat(500),
            "<ul>\n<li>".repeat(300),
            "<blockquote>\n".repeat(500),
            "<span><div></span>".repeat(300),
            // Each misnested `</b>` moves the block into a copy of the `b`: one level more.
            "<b><div></b>x".repeat(500),
            "<a><div><a>x".repeat(500),
            "<table><td><svg><td>".repeat(200),
        ] {
            assert_eq!(shape(&html), Shape::TooDeep, "{}", &html[..40]);
        }
    }

    #[test]
    fn text_of_any_script_is_measured() {
        assert!(matches!(
            shape("é<p>ü</p>€ <b>ß</b>"),
            Shape::Fits { bytes } if bytes > 10
        ));
    }

    /// A chain of 100,000 ancestors (deeper than any tree the measure lets be built) is let
    /// go of without a stack frame per level.
    #[test]
    fn a_long_chain_of_nodes_drops_without_recursion() {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| {
                let mut node = Node::new(nameless(), false, false);
                for _ in 0..100_000 {
                    let child = Node::new(nameless(), false, false);
                    child.parent.replace(Some(node));
                    node = child;
                }
                drop(node);
            })
            .unwrap()
            .join()
            .expect("dropped without overflowing a 64 KiB stack");
    }

    #[test]
    fn a_cancelled_budget_stops_the_measure() {
        let budget = Budget::unlimited();
        budget.cancel();
        let long = "<p>x</p>".repeat(1000);
        assert_eq!(measure(&long, MIB, &budget), Err(Stop::Cancelled));
    }
}
